"""`MaskedMaxPooling`: max over the real positions of padded sequences."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedMaxPooling(keras.layers.Layer):
    """`[batch, time, d]` with a mask -> `[batch, d]`: each feature's maximum over the real
    positions (padding never wins, whatever its values), zeros for a sequence with none; the
    sentence encoders of GLUE's BiLSTM baselines pool this way.

    Example:
    >>> x = tf.constant([[[1.0], [9.0]], [[2.0], [3.0]]])
    >>> MaskedMaxPooling()(x, mask=tf.constant([[True, False], [True, True]])).numpy().tolist()
    [[1.0], [3.0]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        inputs = tf.convert_to_tensor(inputs)
        if mask is None:
            return tf.reduce_max(inputs, axis=1)
        mask = tf.cast(mask, tf.bool)
        lowest = tf.cast(inputs.dtype.min, inputs.dtype)
        pooled = tf.reduce_max(tf.where(mask[:, :, None], inputs, lowest), axis=1)
        return tf.where(tf.reduce_any(mask, axis=1)[:, None], pooled, tf.zeros_like(pooled))

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])
