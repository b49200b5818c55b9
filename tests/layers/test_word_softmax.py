import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers.word_softmax import WordSoftmax
from elmo_tf.ops.softmax import full_softmax_nll, sampled_softmax_nll
from tests.conftest import assert_serializable


def _softmax(vocabulary_size=50, num_negatives=10, dtype=None):
    layer = WordSoftmax(vocabulary_size, num_negatives, dtype=dtype)
    layer.build((None, 6))
    rng = np.random.default_rng(0)
    layer.kernel.assign(rng.normal(size=(vocabulary_size, 6)).astype("float32"))
    layer.bias.assign(rng.normal(size=vocabulary_size).astype("float32"))
    return layer


def test_full_in_evaluation_sampled_in_training_when_the_vocabulary_is_larger():
    layer = _softmax()
    outputs = tf.random.stateless_normal([7, 6], seed=[1, 2])
    targets = tf.constant([0, 3, 9, 1, 49, 2, 2])
    full = full_softmax_nll(layer.kernel, layer.bias, outputs, targets)
    np.testing.assert_allclose(layer(outputs, targets), full, rtol=1e-6)
    seed = tf.constant([4, 5])
    np.testing.assert_allclose(
        layer(outputs, targets, training=True, seed=seed),
        sampled_softmax_nll(layer.kernel, layer.bias, outputs, targets, 10, seed), rtol=1e-6)
    assert layer.samples and not WordSoftmax(50, num_negatives=50).samples
    small = _softmax(vocabulary_size=10, num_negatives=10)  # sampling all of it: the full one
    np.testing.assert_allclose(small(outputs, targets % 10, training=True),
                               small(outputs, targets % 10), rtol=1e-6)


def test_float32_weights_and_loss_under_a_mixed_global_policy_and_round_trip():
    import keras

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = _softmax()
    finally:
        keras.config.set_dtype_policy("float32")
    assert layer.kernel.dtype == "float32"
    outputs = tf.cast(tf.random.stateless_normal([3, 6], seed=[1, 2]), tf.bfloat16)
    assert layer(outputs, tf.constant([1, 2, 3])).dtype == tf.float32
    restored = assert_serializable(WordSoftmax(50, 10))
    assert (restored.vocabulary_size, restored.num_negatives) == (50, 10)
    with pytest.raises(ValueError, match="vocabulary_size"):
        WordSoftmax(3)
    with pytest.raises(ValueError, match="num_negatives"):
        WordSoftmax(50, num_negatives=0)
