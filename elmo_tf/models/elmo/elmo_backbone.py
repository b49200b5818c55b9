"""`ElmoBackbone`: the ELMo biLM as a Keras functional model."""

import keras
import tensorflow as tf

from elmo_tf.layers.bilm_stack import BiLMStack
from elmo_tf.layers.initializers import skip_initialization
from elmo_tf.layers.projected_lstm import removed_implementation
from elmo_tf.layers.token_encoder import TokenEncoder
from elmo_tf.models.elmo import elmo_weights
from elmo_tf.models.backbone import Backbone, sentence_graph
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.ops.padding import char_ids_mask


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoBackbone(Backbone):
    """The ELMo biLM: char ids -> the biLM's layer representations.

    The model adds `<S>`/`</S>` itself, encodes every token with the char CNN, highways and
    projection, runs the two LSTM stacks and removes the boundaries again
    (`../shared/spec/elmo-reference.md` §4). It is stateless by default: every call starts from
    zero state, so a sentence always gets the same vectors whatever else is in the batch.
    `stateful=True` reproduces the reference implementations' state carried per batch row
    (see `BiLMStack`); `reset_states()` clears it.

    Inputs and outputs are the `Backbone` contract (char ids of sentences without boundaries;
    "layers", "mask", the same with boundaries, "token_embeddings"). Here "layers" has
    `num_layers = n_layers + 1` entries of `output_dim = 2P`: layer 0 the token embedding
    duplicated, `[x; x]`, then `[forward; backward]` of each LSTM layer; `token_dim = P`.

    Args:
        config: an `ElmoConfig` (or its `to_dict()`).
        stateful: carry LSTM state from call to call, per batch row.
        max_batch_size: rows of kept state when stateful (bilm-tf's default, 128).
        dropout: dropout on every LSTM layer's input in training (see `BiLMStack`); the
            pre-training recipes use 0.1, as the paper does.
        dtype: Keras dtype policy, e.g. `"mixed_bfloat16"` for fast CPU inference.

    Example:
    >>> backbone = ElmoBackbone.from_allennlp("options.json", "weights.hdf5")
    >>> outputs = backbone(elmo_tf.tokens_to_char_ids([["The", "cat", "sat"], ["Hi", ""]]))
    >>> outputs["layers"].shape  # [batch, 3, time, 2P]
    TensorShape([2, 3, 3, 1024])
    """

    def __init__(self, config, stateful=False, max_batch_size=128, dropout=0.0, dtype=None,
                 **kwargs):
        kwargs = removed_implementation(kwargs)
        if isinstance(config, dict):
            config = ElmoConfig(**config)
        if config.fully_bidirectional:
            raise ValueError("this ElmoConfig describes Masked ELMo's fully bidirectional layers: "
                             "build a MaskedElmoBackbone (elmo_tf.models.load_backbone reads "
                             "either from files).")
        # === Layers ===
        token_encoder = TokenEncoder.from_elmo_config(config, dtype=dtype, name="token_encoder")
        bilm = BiLMStack(config.n_layers, config.lstm_dim, config.projection_dim,
                         config.cell_clip, config.proj_clip, config.use_skip_connections,
                         stateful=stateful, max_batch_size=max_batch_size, dropout=dropout,
                         dtype=dtype,
                         name="bilm")

        # === Functional Model ===
        super().__init__(**sentence_graph(config.max_characters_per_token, token_encoder, bilm),
                         dtype=dtype, **kwargs)

        # === Config ===
        self.config = config
        self.token_encoder = token_encoder
        self.bilm = bilm
        self.num_layers = config.n_layers + 1
        self.output_dim = config.output_dim
        self.token_dim = config.projection_dim
        self.max_characters_per_token = config.max_characters_per_token

    @property
    def stateful(self):
        return self.bilm.stateful

    @property
    def max_batch_size(self):
        return self.bilm.max_batch_size

    @property
    def dropout(self):
        return self.bilm.dropout

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

    def reset_states(self):
        """Zeroes the carried LSTM state of a stateful backbone (no-op when stateless)."""
        self.bilm.reset_states()

    # --- released AllenNLP / bilm-tf files -----------------------------------------------
    @classmethod
    def from_allennlp(cls, options_file, weight_file, stateful=False, **kwargs):
        """Builds the model described by `options_file` and loads `weight_file` (released layout).

        Args:
            options_file: bilm-tf/AllenNLP `*_options.json`.
            weight_file: `*_weights.hdf5` in the released layout.
            stateful: see the class docstring.
            **kwargs: other constructor arguments (`dtype`, `max_batch_size`, ...).
        """
        config = ElmoConfig.from_options_json(options_file)
        with skip_initialization():  # every weight is assigned from the file
            backbone = cls(config, stateful=stateful, **kwargs)
        elmo_weights.load(backbone, weight_file)
        return backbone

    def save_allennlp(self, weight_file, options_file=None):
        """Writes the weights (and options.json) in the released layout, atomically."""
        elmo_weights.save(self, weight_file)
        if options_file is not None:
            self.config.to_options_json(options_file)

    # --- Keras serialization -------------------------------------------------------------
    def get_config(self):
        # The layers' policy: a functional model's own policy stays float32 whatever it is given.
        return {"name": self.name, "trainable": self.trainable,
                "dtype": keras.saving.serialize_keras_object(self.bilm.dtype_policy),
                "config": self.config.to_dict(), "stateful": self.stateful,
                "max_batch_size": self.max_batch_size, "dropout": self.dropout}
