"""`CharLSTMBackbone`: what ELMo's and Masked ELMo's backbones share."""

import keras

from elmo_tf.layers.token_encoder import TokenEncoder
from elmo_tf.models.backbone import Backbone, sentence_graph
from elmo_tf.models.elmo import elmo_weights
from elmo_tf.models.elmo.elmo_config import ElmoConfig


class CharLSTMBackbone(Backbone):
    """Base of the backbones of ELMo's architecture (`ElmoBackbone`, `MaskedElmoBackbone`): a
    token encoder (`TokenEncoder`: char CNN, highways, projection) then a stack of forward and
    backward LSTM layers (an `LSTMStack`), described by a config (`config_class`), stored in
    bilm-tf's released file layout (`elmo_weights`).

    A subclass builds its stack and hands it, with the config, to `__init__`, which builds the
    `Backbone` contract's functional graph. "layers" has `num_layers = n_layers + 1` entries of
    `output_dim = 2P` (layer 0 the token embedding duplicated, `[x; x]`, then `[forward;
    backward]` of each LSTM layer); `token_dim = P`.

    Args:
        config: the subclass's `config_class` (or its `to_dict()`).
        stack: the LSTM stack (`BiLMStack`, `BiLSTMStack`), named "bilm".
        dtype: Keras dtype policy.
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`from_allennlp`; the subclass builds its stack so too).

    Example:
    >>> class MyBackbone(CharLSTMBackbone):
    ...     def __init__(self, config, **kwargs):
    ...         config = ElmoConfig.from_dict(config)
    ...         super().__init__(config, BiLMStack(config.n_layers, config.lstm_dim,
    ...                                            config.projection_dim, name="bilm"), **kwargs)
    """

    config_class = ElmoConfig

    def __init__(self, config, stack, dtype=None, initialize=True, **kwargs):
        # === Layers ===
        token_encoder = TokenEncoder.from_elmo_config(config, dtype=dtype, initialize=initialize,
                                                      name="token_encoder")

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

    @classmethod
    def checked_config(cls, config):
        """`config` as the subclass's `config_class` (from a `to_dict()` dict too); a
        ValueError for another architecture's config."""
        if type(config) is not dict and type(config) is not cls.config_class:
            raise ValueError(f"{cls.__name__} takes a {cls.config_class.__name__}; got a "
                             f"{type(config).__name__} (build the backbone of its family: "
                             "elmo_tf.models.load_backbone reads any family's files).")
        return cls.config_class.from_dict(config)

    @property
    def dropout(self):
        return self.bilm.dropout

    def reset_states(self):
        """Zeroes the stack's carried state (a no-op when it carries none)."""
        self.bilm.reset_states()

    # --- released AllenNLP / bilm-tf files -----------------------------------------------
    @classmethod
    def from_allennlp(cls, options_file, weight_file, **kwargs):
        """Builds the model `options_file` describes and loads `weight_file` (the released
        layout, `elmo_weights`).

        Args:
            options_file: bilm-tf/AllenNLP `*_options.json` (elmo-tf's own keys for the
                subclass's architecture).
            weight_file: `*_weights.hdf5` in the released layout.
            **kwargs: the other constructor arguments (`dtype`, ...).
        """
        config = cls.config_class.from_options_json(options_file)
        backbone = cls(config, initialize=False, **kwargs)  # every weight is assigned next
        elmo_weights.load(backbone, weight_file)
        return backbone

    def save_allennlp(self, weight_file, options_file=None, training=None):
        """Writes the weights (and options.json, with bilm-tf's `training` keys if given) in
        the released layout, atomically."""
        elmo_weights.save(self, weight_file)
        if options_file is not None:
            config = self.config if training is None else type(self.config).from_dict(
                {**self.config.to_dict(), "training": training})
            config.to_options_json(options_file)

    def get_config(self):
        # The layers' policy (the stack's): what `dtype` gave them, whatever the model's own.
        return {"name": self.name, "trainable": self.trainable,
                "dtype": keras.saving.serialize_keras_object(self.bilm.dtype_policy),
                "config": self.config.to_dict(), "dropout": self.dropout}
