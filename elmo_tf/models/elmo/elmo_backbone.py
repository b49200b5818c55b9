"""`ElmoBackbone`: the ELMo biLM as a Keras functional model."""

import keras
import tensorflow as tf

from elmo_tf.layers.bilm_stack import BiLMStack
from elmo_tf.layers.projected_lstm import removed_implementation
from elmo_tf.models.char_lstm_backbone import CharLSTMBackbone
from elmo_tf.ops.padding import char_ids_mask


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoBackbone(CharLSTMBackbone):
    """The ELMo biLM: char ids -> the biLM's layer representations.

    The model adds `<S>`/`</S>` itself, encodes every token with the char CNN, highways and
    projection, runs the two LSTM stacks and removes the boundaries again
    (`docs/conventions.md` §4). It is stateless by default: every call starts from
    zero state, so a sentence always gets the same vectors whatever else is in the batch.
    `stateful=True` reproduces the reference implementations' state carried per batch row
    (see `BiLMStack`); `reset_states()` clears it.

    Inputs and outputs are the `Backbone` contract (char ids of sentences without boundaries;
    "layers", "mask", the same with boundaries, "token_embeddings"). Here "layers" has
    `num_layers = n_layers + 1` entries of `output_dim = 2P`: layer 0 the token embedding
    duplicated, `[x; x]`, then `[forward; backward]` of each LSTM layer; `token_dim = P`.

    Args:
        config: an `ElmoConfig` (or its `to_dict()`; `ElmoConfig.from_architecture(name)`).
        stateful: carry LSTM state from call to call, per batch row.
        max_batch_size: rows of kept state when stateful (bilm-tf's default, 128).
        dropout: dropout on every LSTM layer's input in training (see `BiLMStack`); the
            pre-training recipes use 0.1, as the paper does.
        dtype: Keras dtype policy, e.g. `"mixed_bfloat16"` for fast CPU inference.
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`from_allennlp` builds so).

    Example:
    >>> backbone = ElmoBackbone.from_allennlp("options.json", "weights.hdf5")
    >>> outputs = backbone(elmo_tf.tokens_to_char_ids([["The", "cat", "sat"], ["Hi", ""]]))
    >>> outputs["layers"].shape  # [batch, 3, time, 2P]
    TensorShape([2, 3, 3, 1024])
    """

    def __init__(self, config, stateful=False, max_batch_size=128, dropout=0.0, dtype=None,
                 initialize=True, **kwargs):
        kwargs = removed_implementation(kwargs)
        config = self.checked_config(config)
        # === Layers ===
        bilm = BiLMStack(config.n_layers, config.lstm_dim, config.projection_dim,
                         cell_clip=config.cell_clip, proj_clip=config.proj_clip,
                         use_skip_connections=config.use_skip_connections, stateful=stateful,
                         max_batch_size=max_batch_size, dropout=dropout, dtype=dtype,
                         initialize=initialize, name="bilm")

        # === Functional Model ===
        super().__init__(config, bilm, dtype=dtype, initialize=initialize, **kwargs)

    @property
    def stateful(self):
        return self.bilm.stateful

    @property
    def max_batch_size(self):
        return self.bilm.max_batch_size

    def encode_stream(self, char_ids, backward_char_ids=None, training=False):
        """The biLM's layers for token streams, where `<S>`/`</S>` are tokens of the text (the
        pre-training batches of `elmo_tf.data`): no boundaries are added or removed.

        Args:
            char_ids: int32 `[batch, time, chars]`, right-padded.
            backward_char_ids: optional, the same shape: what the backward stack reads, when the
                directions read different text (bilm-tf's independent direction streams);
                layer 0 is then `[forward input; backward input]`.
            training: for dropout.

        Returns:
            `[batch, n_layers + 1, time, 2P]` in the compute dtype (zeros at padding).
        """
        mask = char_ids_mask(char_ids)
        if backward_char_ids is None:
            embeddings, backward_embeddings = self.token_encoder(char_ids), None
        else:  # one pass of the token encoder over both directions' text
            batch = tf.shape(char_ids)[0]
            both = self.token_encoder(tf.concat([char_ids, backward_char_ids], 0))
            embeddings, backward_embeddings = both[:batch], both[batch:]
        return self.bilm(embeddings, mask=mask, backward_token_embeddings=backward_embeddings,
                         training=training)

    def get_config(self):
        return {**super().get_config(), "stateful": self.stateful,
                "max_batch_size": self.max_batch_size}
