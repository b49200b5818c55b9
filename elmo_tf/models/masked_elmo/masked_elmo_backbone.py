"""`MaskedElmoBackbone`: Masked ELMo's fully bidirectional LSTM encoder as a Keras functional
model that keeps the `Backbone` contract."""

import dataclasses

import keras

from elmo_tf.layers.bilstm_stack import BiLSTMStack
from elmo_tf.layers.initializers import skip_initialization
from elmo_tf.layers.token_encoder import TokenEncoder
from elmo_tf.models.backbone import Backbone, sentence_graph
from elmo_tf.models.elmo import elmo_weights
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_presets import MASKED_ELMO_PRESETS
from elmo_tf.ops.padding import char_ids_mask


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedElmoBackbone(Backbone):
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
    {"fully_bidirectional": true}`, which `elmo_tf.models.load_backbone` reads to build the right
    backbone.

    Args:
        config: an `ElmoConfig` (or its dict), e.g. `ElmoConfig(**MASKED_ELMO_PRESETS[name])`
            or `MaskedElmoBackbone.from_preset(name)`; its `fully_bidirectional` is set. The
            presets' cells have no clips (`docs/masked_elmo.md`); a config with clips gets
            ELMo's clipped cells, and `lstm_projection=False` cells without projection.
        stream_rows: rows of state kept for `encode_stream` (stream pre-training: a
            replica's batch size); None for a backbone that reads sentences only.
        dropout: dropout on every LSTM layer's input in training.
        dtype: Keras dtype policy.

    Example:
    >>> backbone = MaskedElmoBackbone.from_preset("tiny_masked")
    >>> outputs = backbone(elmo_tf.tokens_to_char_ids([["The", "cat"], ["Hi", ""]]))
    >>> outputs["layers"].shape  # [batch, 3, time, 2P]
    TensorShape([2, 3, 2, 32])
    """

    def __init__(self, config, stream_rows=None, dropout=0.0, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = ElmoConfig(**config)
        config = dataclasses.replace(config, fully_bidirectional=True)
        # === Layers ===
        token_encoder = TokenEncoder.from_elmo_config(config, dtype=dtype, name="token_encoder")
        stack = BiLSTMStack(config.n_layers, config.lstm_dim, config.projection_dim,
                            config.use_skip_connections, cell_clip=config.cell_clip,
                            proj_clip=config.proj_clip, projection=config.lstm_projection,
                            stateful=stream_rows is not None,
                            max_batch_size=stream_rows or 1, dropout=dropout, dtype=dtype,
                            name="bilm")

        # === Functional Model ===
        super().__init__(**sentence_graph(config.max_characters_per_token, token_encoder, stack),
                         dtype=dtype, **kwargs)

        # === Config ===
        self.config = config
        self.token_encoder = token_encoder
        self.bilm = stack
        self.num_layers = config.n_layers + 1
        self.output_dim = config.output_dim
        self.token_dim = config.projection_dim
        self.max_characters_per_token = config.max_characters_per_token

    @property
    def dropout(self):
        return self.bilm.dropout

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

    def reset_states(self):
        """Zeroes the state kept between stream windows."""
        self.bilm.reset_states()

    @classmethod
    def presets(cls):
        """Names of the preset architectures (`masked_elmo_presets.MASKED_ELMO_PRESETS`)."""
        return tuple(MASKED_ELMO_PRESETS)

    @classmethod
    def from_preset(cls, name, **kwargs):
        """A freshly initialised backbone of the preset architecture `name`."""
        if name not in MASKED_ELMO_PRESETS:
            raise ValueError(f"unknown Masked ELMo preset {name!r}; known: "
                             f"{', '.join(MASKED_ELMO_PRESETS)}.")
        return cls(ElmoConfig(**MASKED_ELMO_PRESETS[name]), **kwargs)

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
        config = ElmoConfig.from_options_json(options_file)
        if not config.fully_bidirectional:
            raise ValueError(f"{options_file} describes an ELMo biLM, not Masked ELMo (no "
                             "lstm.fully_bidirectional): use ElmoBackbone.from_allennlp, or "
                             "elmo_tf.models.load_backbone for either.")
        with skip_initialization():  # every weight is assigned from the file
            backbone = cls(config, **kwargs)
        elmo_weights.load(backbone, weight_file)
        return backbone

    def save_allennlp(self, weight_file, options_file=None):
        """Writes the weights (and options.json), atomically."""
        elmo_weights.save(self, weight_file)
        if options_file is not None:
            self.config.to_options_json(options_file)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "dtype": keras.saving.serialize_keras_object(self.bilm.dtype_policy),
                "config": self.config.to_dict(), "stream_rows": self.stream_rows,
                "dropout": self.dropout}
