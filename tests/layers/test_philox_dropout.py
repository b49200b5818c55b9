"""`PhiloxDropout`: Keras's `Dropout` without XLA, bit for bit; under XLA a dropout of its rate
(the Philox generator named, which XLA runs fast on CPUs)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers import PhiloxDropout
from tests.conftest import assert_serializable


def test_without_xla_the_same_masks_as_keras_dropout_from_the_same_seed():
    x = tf.ones([4, 6, 8])
    for rate, noise_shape in ((0.5, None), (0.2, (None, 1, 8))):
        ours = PhiloxDropout(rate, noise_shape=noise_shape, seed=3)
        keras_ = keras.layers.Dropout(rate, noise_shape=noise_shape, seed=3)
        for _ in range(3):  # each call draws anew, from the same seed generator state
            np.testing.assert_array_equal(ours(x, training=True), keras_(x, training=True))
        np.testing.assert_array_equal(ours(x), x)  # not training: the inputs
    assert not PhiloxDropout(1.0)(x, training=True).numpy().any()


@pytest.mark.parametrize("rate", [0.25, 0.5])
def test_under_xla_it_drops_its_rate_and_scales_the_rest(rate):
    drop = PhiloxDropout(rate, seed=1)
    x = tf.ones([64, 50, 32])
    compiled = tf.function(lambda x: drop(x, training=True), jit_compile=True)
    first, second = compiled(x).numpy(), compiled(x).numpy()
    for out in (first, second):
        kept = out != 0
        assert abs(1 - kept.mean() - rate) < 0.01
        np.testing.assert_allclose(out[kept], 1 / (1 - rate), rtol=1e-6)
    assert (first != second).any()  # a new mask at every call


def test_config_and_dtype_policy():
    drop = PhiloxDropout(0.3, noise_shape=(None, 1), seed=5, dtype="bfloat16", name="d")
    assert_serializable(drop, tf.ones([2, 3]))
    assert drop(tf.ones([2, 3]), training=True).dtype == tf.bfloat16
