"""`ToyConfig` and `ToyBackbone`: a backbone that keeps the `Backbone` contract."""

import dataclasses
import types

import h5py
import keras
import numpy as np
import tensorflow as tf

from elmo_tf.files import read_json, write_json_atomically
from elmo_tf.models.backbone import Backbone, sentence_graph
from elmo_tf.text.char_ids import N_CHAR_IDS


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    """The toy's shape; its options.json is `{"toy": {"dim": ..., ...}, ...training keys}`."""

    dim: int
    max_characters_per_token: int = 20
    training: dict = dataclasses.field(default_factory=dict, compare=False)

    PRESETS = {"toy_tiny": {"dim": 8}}
    ALIASES = {}

    @classmethod
    def from_architecture(cls, name):
        return cls(**cls.PRESETS[name])

    @classmethod
    def from_options(cls, options, source="options"):
        return cls(**options["toy"], training={k: v for k, v in options.items() if k != "toy"})

    @classmethod
    def from_options_json(cls, path):
        return cls.from_options(read_json(path), str(path))

    def to_options(self):
        return {"toy": {"dim": self.dim,
                        "max_characters_per_token": self.max_characters_per_token},
                **self.training}

    def to_options_json(self, path):
        write_json_atomically(path, self.to_options())

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return d if isinstance(d, cls) else cls(**d)


class BagOfCharacters(keras.layers.Layer):
    """Char ids `[batch, time, chars]` -> the mean of each token's char embeddings."""

    def __init__(self, dim, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim

    def build(self, input_shape):
        self.table = self.add_weight(shape=(N_CHAR_IDS, self.dim), name="table")

    def call(self, char_ids):
        present = tf.cast(char_ids > 0, self.compute_dtype)[..., None]
        total = tf.reduce_sum(tf.gather(self.table, char_ids) * present, axis=-2)
        return tf.math.divide_no_nan(total, tf.reduce_sum(present, axis=-2))


class RunningMeans(keras.layers.Layer):
    """Tokens `[batch, time, dim]` -> layers `[batch, 2, time, 2 dim]`: `[x; x]`, then the
    projected running means of the tokens up to each position, left to right and right to
    left; zeros at padding."""

    def __init__(self, dim, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim
        self.supports_masking = True

    def compute_mask(self, x, mask=None):
        return None  # a layer axis comes first; the contract keeps the [batch, time] mask

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(self.dim, self.dim), name="kernel")

    def call(self, x, mask=None):
        m = tf.cast(mask, x.dtype)[..., None]
        x = x * m

        def running_mean(values, weights, reverse):
            return tf.math.divide_no_nan(tf.cumsum(values, axis=1, reverse=reverse),
                                         tf.cumsum(weights, axis=1, reverse=reverse))

        forward = tf.tanh(running_mean(x, m, False) @ self.kernel) * m
        backward = tf.tanh(running_mean(x, m, True) @ self.kernel) * m
        return tf.stack([tf.concat([x, x], -1), tf.concat([forward, backward], -1)], axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2, input_shape[1], 2 * self.dim)


@keras.saving.register_keras_serializable(package="elmo_tf_toy")
class ToyBackbone(Backbone):
    """The toy's functional model: the contract's graph (`sentence_graph`) around
    `BagOfCharacters` and `RunningMeans`."""

    config_class = ToyConfig

    def __init__(self, config, dtype=None, **kwargs):
        config = ToyConfig.from_dict(config)
        # sentence_graph runs a token encoder's parts in turn: here one layer.
        encoder = types.SimpleNamespace(parts=[BagOfCharacters(config.dim, dtype=dtype,
                                                               name="bag_of_characters")])
        stack = RunningMeans(config.dim, dtype=dtype, name="running_means")
        super().__init__(**sentence_graph(config.max_characters_per_token, encoder, stack),
                         dtype=dtype, **kwargs)
        self.config = config
        self.num_layers, self.output_dim, self.token_dim = 2, 2 * config.dim, config.dim
        self.max_characters_per_token = config.max_characters_per_token

    @classmethod
    def from_allennlp(cls, options_file, weight_file, **kwargs):
        backbone = cls(ToyConfig.from_options_json(options_file), **kwargs)
        with h5py.File(weight_file, "r") as f:
            backbone.set_weights([f[str(i)][()] for i in range(len(backbone.weights))])
        return backbone

    def save_allennlp(self, weight_file, options_file=None, training=None):
        with h5py.File(weight_file, "w") as f:
            for i, value in enumerate(self.get_weights()):
                f.create_dataset(str(i), data=np.asarray(value))
        if options_file is not None:
            config = self.config if training is None else dataclasses.replace(
                self.config, training=training)
            config.to_options_json(options_file)

    def get_config(self):
        # The layers' policy: what `dtype` gave them, whatever the model's own.
        return {"name": self.name, "trainable": self.trainable,
                "dtype": keras.saving.serialize_keras_object(
                    self.get_layer("running_means").dtype_policy),
                "config": self.config.to_dict()}
