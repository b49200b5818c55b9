"""`PhiloxDropout`: Keras's `Dropout`, its noise drawn by the Philox generator on every path."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="elmo_tf")
class PhiloxDropout(keras.layers.Dropout):
    """Keras's `Dropout` (the same arguments, seed generator and draws without XLA), with its
    noise drawn by the Philox generator also when XLA compiles it.

    Keras draws with TensorFlow's default algorithm, which TensorFlow's own kernels run as
    Philox but XLA on CPUs as a generator about 20x slower: a frozen classifier's compiled
    step was 0.097 s with Keras's `Dropout` and 0.042 s with this one (`docs/benchmarks.md`,
    "Dropout under XLA"). Named here, Philox is fast on both paths; the masks without XLA are
    Keras's, bit for bit. Under XLA the masks differ from those without it, as Keras's do.

    Args:
        rate: the fraction of the inputs dropped (in training), in [0, 1].
        noise_shape, seed: as Keras's `Dropout`.

    Example:
    >>> drop = PhiloxDropout(0.5, seed=1)
    >>> set(drop(tf.ones([2, 4]), training=True).numpy().ravel()) <= {0.0, 2.0}
    True
    """

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        if self.rate == 1:
            return tf.zeros_like(inputs)
        # Keras's `backend.random.dropout`, with the generator named.
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1),
                       tf.int32)
        shape = tf.shape(inputs)
        noise_shape = shape if self.noise_shape is None else [
            shape[i] if size is None else size for i, size in enumerate(self.noise_shape)]
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate,
                                                    noise_shape=noise_shape, seed=seed,
                                                    rng_alg="philox")
