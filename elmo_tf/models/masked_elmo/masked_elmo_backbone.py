"""`MaskedElmoBackbone`: Masked ELMo's fully bidirectional LSTM encoder as a Keras functional
model that keeps the `Backbone` contract."""

import keras

from elmo_tf.layers.bilstm_stack import BiLSTMStack
from elmo_tf.models.char_lstm_backbone import CharLSTMBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_config import MaskedElmoConfig
from elmo_tf.ops.padding import char_ids_mask


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedElmoBackbone(CharLSTMBackbone):
    """Masked ELMo: ELMo's token encoder, then bidirectional LSTM layers (`BiLSTMStack`).

    The same token encoder as ELMo (char CNN, highways, projection; `TokenEncoder`), so
    released ELMo weights can initialise it (`load_token_encoder_from`), then `n_layers`
    bidirectional layers whose next layer reads `[forward; backward]`. Inputs and outputs are
    the `Backbone` contract: char ids of sentences without boundaries; "layers" has
    `num_layers = n_layers + 1` entries of `2P` (layer 0 the token embedding duplicated, then
    `[forward; backward]` of each layer), "mask", the same with boundaries, and
    "token_embeddings". So `ElmoEmbedding`, the SavedModel export and `dump` take it as they
    take `ElmoBackbone`. Stateless: every call starts from zero state. Stream pre-training
    (bidirectional truncated backpropagation through time) goes through `encode_stream`, which
    carries state from window to window in `stream_rows` rows (see `BiLSTMStack`).

    Weights files: `save_allennlp`/`from_allennlp` write and read AllenNLP's hdf5 layout with its
    names (`char_embed`, `CNN/...`, `CNN_high_k/...`, `CNN_proj/...`, and
    `RNN_d/RNN/MultiRNNCell/Cellk/LSTMCell/{W_0,B,W_P_0}` for direction d, layer k), the only
    differences being `W_0`'s rows: `2P + P` from the second layer on (its input is `[forward;
    backward]`), and no `W_P_0` for cells without projection. options.json says `"lstm":
    {"fully_bidirectional": true}` (`MaskedElmoConfig`), which `elmo_tf.models.load_backbone`
    reads to build the right backbone.

    Args:
        config: a `MaskedElmoConfig` (or its dict), e.g.
            `MaskedElmoConfig.from_architecture(name)`, or an `ElmoConfig` (ELMo's shape with
            these layers). The presets' cells have no clips (`docs/masked_elmo.md`); a config
            with clips gets ELMo's clipped cells, and `lstm_projection=False` cells without
            projection.
        stream_rows: rows of state kept for `encode_stream` (stream pre-training: a
            replica's batch size); None for a backbone that reads sentences only.
        dropout: dropout on every LSTM layer's input in training.
        dtype: Keras dtype policy.
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`from_allennlp` builds so).

    Example:
    >>> backbone = MaskedElmoBackbone.from_architecture("tiny_masked")
    >>> outputs = backbone(elmo_tf.tokens_to_char_ids([["The", "cat"], ["Hi", ""]]))
    >>> outputs["layers"].shape  # [batch, 3, time, 2P]
    TensorShape([2, 3, 2, 32])
    """

    config_class = MaskedElmoConfig

    def __init__(self, config, stream_rows=None, dropout=0.0, dtype=None, initialize=True,
                 **kwargs):
        config = self.checked_config(config)
        # === Layers ===
        stack = BiLSTMStack(config.n_layers, config.lstm_dim, config.projection_dim,
                            use_skip_connections=config.use_skip_connections,
                            cell_clip=config.cell_clip, proj_clip=config.proj_clip,
                            projection=config.lstm_projection, stateful=stream_rows is not None,
                            max_batch_size=stream_rows or 1, dropout=dropout, dtype=dtype,
                            initialize=initialize, name="bilm")

        # === Functional Model ===
        super().__init__(config, stack, dtype=dtype, initialize=initialize, **kwargs)

    @classmethod
    def checked_config(cls, config):
        if type(config) is ElmoConfig:  # ELMo's shape, with Masked ELMo's layers
            config = config.to_dict()
        return super().checked_config(config)

    @property
    def stream_rows(self):
        return self.bilm.max_batch_size if self.bilm.stateful else None

    def encode_stream(self, char_ids, training=False):
        """The layers for windows of token streams (`<S>`/`</S>` are tokens of the stream: no
        boundaries are added), starting from the state the previous windows left and keeping
        the final one: bidirectional truncated backpropagation through time, in the layout
        `BiLSTMStack` describes. Needs `stream_rows`.

        Args:
            char_ids: int32 `[batch, time, chars]`, `batch <= stream_rows`.
            training: for dropout.

        Returns:
            `[batch, n_layers + 1, time, 2P]` in the compute dtype.
        """
        if self.stream_rows is None:
            raise ValueError("encode_stream needs a backbone built with stream_rows (the rows "
                             "of state it keeps between windows).")
        return self.bilm(self.token_encoder(char_ids), mask=char_ids_mask(char_ids),
                         training=training, carry_state=True)

    def load_token_encoder_from(self, elmo_backbone):
        """Copies an ELMo backbone's token encoder weights (e.g. released ones, through
        `ElmoBackbone.from_allennlp`) into this one; the shapes must match."""
        source = elmo_backbone.token_encoder.get_weights()
        target = self.token_encoder.get_weights()
        if [w.shape for w in source] != [w.shape for w in target]:
            raise ValueError("the ELMo backbone's token encoder has another shape than this "
                             "one (char CNN filters, highways, projection): build this backbone "
                             "with the same ElmoConfig apart from the clips.")
        self.token_encoder.set_weights(source)

    @classmethod
    def from_allennlp(cls, options_file, weight_file, **kwargs):
        """Builds the backbone `options_file` describes and loads `weight_file` (see the class
        docstring for the layout)."""
        if kwargs.pop("stateful", False):
            raise ValueError("Masked ELMo's calls are stateless (its layers read both "
                             "directions of the whole sentence): leave out stateful=True "
                             "(stream pre-training carries state through encode_stream).")
        kwargs.pop("max_batch_size", None)
        return super().from_allennlp(options_file, weight_file, **kwargs)

    def get_config(self):
        return {**super().get_config(), "stream_rows": self.stream_rows}
