"""`TokenEncoder`: char ids -> context-independent token vectors (char CNN, highways, projection)."""

import math

import keras

from elmo_tf.layers.char_cnn import CharCNN
from elmo_tf.layers.highway import Highway
from elmo_tf.layers.initializers import initializer


@keras.saving.register_keras_serializable(package="elmo_tf")
class TokenEncoder(keras.layers.Layer):
    """ELMo's token encoder, shared by every backbone: `[batch, time, chars]` char ids ->
    `[batch, time, projection_dim]` token vectors in the compute dtype.

    bilm-tf's character encoder (`docs/conventions.md` §4.1): `CharCNN`, then
    `n_highway` `Highway` layers, then a linear projection to `projection_dim` when the CNN's
    width differs from it (bilm-tf has none otherwise, and neither has its weight file). Each
    token is encoded on its own: no context, no mask (a padding token gets a fixed vector).
    The released weights map onto its parts (`elmo_tf.models.elmo.elmo_weights`).

    Args:
        filters: `(width, n_filters)` pairs of the char CNN.
        char_embedding_dim: char embedding size.
        projection_dim: the token vector size P.
        n_highway: highway layers.
        activation: the char CNN's `"relu"` or `"tanh"`.
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`initializers.initializer`; not part of the config).

    Example:
    >>> encoder = TokenEncoder(filters=[[1, 4], [2, 8]], char_embedding_dim=4, projection_dim=6,
    ...                        n_highway=1)
    >>> encoder(tokens_to_char_ids([["Hello", "world"]])).shape
    TensorShape([1, 2, 6])
    """

    def __init__(self, filters, char_embedding_dim, projection_dim, n_highway=0,
                 activation="relu", initialize=True, **kwargs):
        super().__init__(**kwargs)
        self.filters = [[int(w), int(n)] for w, n in filters]
        self.char_embedding_dim = int(char_embedding_dim)
        self.projection_dim = int(projection_dim)
        self.n_highway = int(n_highway)
        self.activation = activation
        dtype = self.dtype_policy
        self.char_cnn = CharCNN(self.filters, self.char_embedding_dim, activation, dtype=dtype,
                                initialize=initialize, name="char_cnn")
        self.highways = [Highway(initialize=initialize, dtype=dtype, name=f"highway_{k}")
                         for k in range(n_highway)]
        self.projection = None
        width = self.char_cnn.output_dim
        if width != self.projection_dim:
            self.projection = keras.layers.Dense(
                self.projection_dim, dtype=dtype, name="projection",
                kernel_initializer=initializer(keras.initializers.RandomNormal(
                    stddev=math.sqrt(1.0 / width)), initialize))

    @classmethod
    def from_elmo_config(cls, config, **kwargs):
        """The encoder an `ElmoConfig` describes."""
        return cls(config.filters, config.char_embedding_dim, config.projection_dim,
                   config.n_highway, config.activation, **kwargs)

    @property
    def parts(self):
        """The layers in the order they run: the char CNN, the highways, the projection."""
        return [self.char_cnn, *self.highways] + ([self.projection] if self.projection else [])

    def build(self, input_shape):
        shape = input_shape
        for layer in self.parts:
            if not layer.built:  # a backbone's graph may have built them already
                layer.build(shape)
            shape = layer.compute_output_shape(shape)

    def call(self, char_ids):
        x = char_ids
        for layer in self.parts:
            x = layer(x)
        return x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.projection_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(filters=self.filters, char_embedding_dim=self.char_embedding_dim,
                      projection_dim=self.projection_dim, n_highway=self.n_highway,
                      activation=self.activation)
        return config
