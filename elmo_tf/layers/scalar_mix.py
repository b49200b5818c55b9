"""`ScalarMix`: ELMo's task-specific weighted sum of the biLM layers."""

import keras
import tensorflow as tf

from elmo_tf.layers.philox_dropout import PhiloxDropout


@keras.saving.register_keras_serializable(package="elmo_tf")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_k softmax(w)_k * f(layer_k)`, then dropout: `[batch, L, time, D]` -> `[batch, time, D]`.

    AllenNLP's `ScalarMix` / bilm-tf's `weight_layers` (`docs/conventions.md` §4.6):
    `w` starts at 0 and `gamma` at 1; `f` is the identity, or with `do_layer_norm` a masked
    normalisation with one mean and variance per layer for the **whole batch** (all valid
    positions and all features; AllenNLP's convention, `<S>`/`</S>` included when the caller
    passes the boundary mask) and eps 1e-13 (1e-4 for float16). With `l2_coef`, bilm-tf's
    `l2_coef * sum(w ** 2)` is added to the layer's losses.

    Args:
        num_layers: the number of layers L to mix.
        do_layer_norm: normalise each layer before mixing.
        initial_scalar_parameters: the L pre-softmax weights to start from (default zeros).
        l2_coef: L2 penalty on `w`, or None.
        dropout: dropout rate on the mixed output (training only).
        trainable: False at construction fixes `w` and `gamma` for good (AllenNLP's
            `scalar_mix_parameters`: the given weights, `gamma` = 1).

    Call arguments:
        layers: `[batch, L, time, D]`.
        mask: bool `[batch, time]`; needed for `do_layer_norm` (all positions count otherwise).

    Example:
    >>> mix = ScalarMix(num_layers=3)
    >>> mix(tf.ones([2, 3, 5, 8])).shape
    TensorShape([2, 5, 8])
    """

    def __init__(self, num_layers, do_layer_norm=False, initial_scalar_parameters=None,
                 l2_coef=None, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        if initial_scalar_parameters is not None and len(initial_scalar_parameters) != num_layers:
            raise ValueError(
                f"initial_scalar_parameters has {len(initial_scalar_parameters)} values; it needs "
                f"one per layer ({num_layers}).")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}.")
        self.num_layers = int(num_layers)
        self.do_layer_norm = bool(do_layer_norm)
        self.initial_scalar_parameters = (
            None if initial_scalar_parameters is None
            else [float(v) for v in initial_scalar_parameters])
        self.l2_coef = None if l2_coef is None else float(l2_coef)
        self.dropout = float(dropout)
        self.dropout_layer = PhiloxDropout(self.dropout, dtype=self.dtype_policy)
        self.supports_masking = True

    def build(self, input_shape):
        initial = self.initial_scalar_parameters or [0.0] * self.num_layers
        # Created non-trainable when the layer is: fixed mixes stay fixed even if a parent model
        # later sets `trainable = True` on everything.
        self.scalar_weights = self.add_weight(
            name="scalar_weights", shape=(self.num_layers,),
            initializer=keras.initializers.Constant(initial), trainable=self.trainable,
            regularizer=keras.regularizers.L2(self.l2_coef) if self.l2_coef else None)
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones",
                                     trainable=self.trainable)

    def call(self, layers, mask=None, training=None):
        layers = tf.cast(layers, self.compute_dtype)
        dtype = layers.dtype
        weights = tf.cast(tf.nn.softmax(tf.convert_to_tensor(self.scalar_weights)), dtype)
        if self.do_layer_norm:
            layers = self._normalise(layers, mask)
        mixed = tf.einsum("l,bltd->btd", weights, layers) * tf.cast(self.gamma, dtype)
        return self.dropout_layer(mixed, training=training)

    def _normalise(self, layers, mask):
        if mask is None:
            mask = tf.ones([tf.shape(layers)[0], tf.shape(layers)[2]], tf.bool)
        mask = tf.cast(mask, tf.float32)[:, None, :, None]
        x = tf.cast(layers, tf.float32)
        count = tf.reduce_sum(mask, axis=[0, 2, 3]) * tf.cast(tf.shape(x)[-1], tf.float32)
        count = tf.maximum(count, 1.0)[None, :, None, None]
        mean = tf.reduce_sum(x * mask, axis=[0, 2, 3], keepdims=True) / count
        variance = tf.reduce_sum(tf.square((x - mean) * mask), axis=[0, 2, 3], keepdims=True) / count
        epsilon = 1e-4 if layers.dtype == tf.float16 else 1e-13
        return tf.cast((x - mean) / tf.sqrt(variance + epsilon), layers.dtype)

    def compute_mask(self, layers, mask=None):
        return mask  # [batch, time]: the output keeps the time axis

    def compute_output_shape(self, input_shape):
        return (input_shape[0],) + tuple(input_shape[2:])

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, do_layer_norm=self.do_layer_norm,
                      initial_scalar_parameters=self.initial_scalar_parameters,
                      l2_coef=self.l2_coef,
                      dropout=self.dropout)
        return config
