"""`Highway`: one highway layer with bilm-tf's gate convention."""

import math

import keras
import tensorflow as tf

from elmo_tf.layers.initializers import initializer


@keras.saving.register_keras_serializable(package="elmo_tf")
class Highway(keras.layers.Layer):
    """`y = t * relu(x @ W_transform + b_transform) + (1 - t) * x`, `t = sigmoid(x @ W_carry + b_carry)`.

    Exactly bilm-tf's `CNN_high_k` (`docs/conventions.md` §3): the gate computed from
    `W_carry` multiplies the *transform* branch, despite its name, and the non-linearity is ReLU
    whatever `char_cnn.activation` says. Weights keep the hdf5 names and `[in, out]` layout.
    bilm-tf's initialisation: kernels N(0, 1/sqrt(dim)), `b_carry` -2 (starts near pass-through).

    Args:
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`initializers.initializer`; not part of the config).

    Example:
    >>> Highway()(tf.ones([2, 3, 8])).shape
    TensorShape([2, 3, 8])
    """

    def __init__(self, initialize=True, **kwargs):
        super().__init__(**kwargs)
        self.initialize_weights = bool(initialize)

    def build(self, input_shape):
        dim = input_shape[-1]
        init = initializer(keras.initializers.RandomNormal(stddev=math.sqrt(1.0 / dim)),
                           self.initialize_weights)
        self.carry_kernel = self.add_weight(name="W_carry", shape=(dim, dim), initializer=init)
        self.carry_bias = self.add_weight(
            name="b_carry", shape=(dim,),
            initializer=initializer(keras.initializers.Constant(-2.0), self.initialize_weights))
        self.transform_kernel = self.add_weight(name="W_transform", shape=(dim, dim), initializer=init)
        self.transform_bias = self.add_weight(name="b_transform", shape=(dim,), initializer="zeros")

    def call(self, x):
        dtype = self.compute_dtype
        flat = tf.reshape(x, [-1, x.shape[-1]])
        gate = tf.sigmoid(tf.matmul(flat, tf.cast(self.carry_kernel, dtype))
                          + tf.cast(self.carry_bias, dtype))
        transform = tf.nn.relu(tf.matmul(flat, tf.cast(self.transform_kernel, dtype))
                               + tf.cast(self.transform_bias, dtype))
        return tf.reshape(gate * transform + (1.0 - gate) * flat, tf.shape(x))

    def compute_output_shape(self, input_shape):
        return input_shape
