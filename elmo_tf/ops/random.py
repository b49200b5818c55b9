"""Stateless uniform numbers that are the same with and without XLA."""

import tensorflow as tf


def stateless_uniform(shape, seed):
    """Float64 uniforms in [0, 1) from 53 random bits of a stateless Philox generator.

    `tf.random.stateless_uniform`'s floats differ between XLA and TF's kernels (their float
    conversions differ); the bits agree, so these numbers are the same on every path.

    Args:
        shape: the output shape.
        seed: int32 `[2]`.
    """
    bits = tf.random.stateless_uniform(shape, seed=tf.cast(seed, tf.int32), minval=None,
                                       maxval=None, dtype=tf.uint64, alg="philox")
    return tf.cast(tf.bitwise.right_shift(bits, tf.constant(11, tf.uint64)), tf.float64) \
        * 2.0 ** -53
