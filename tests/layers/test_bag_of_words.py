"""`BagOfWords`: the mean of one row per real word, whatever the padding and the order; row
sharing by word; gradients only to the rows read; config, dtype policy, clear errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers.bag_of_words import BagOfWords
from tests.conftest import assert_serializable


def _rows(bag, words):
    """Each word's own vector: the layer on one-word sentences."""
    return {w: bag(tf.constant([[w]])).numpy()[0] for w in words}


def test_the_mean_of_each_real_words_vector_padding_and_order_aside():
    keras.utils.set_random_seed(0)
    bag = BagOfWords(dim=6)
    tokens = [["a", "fine", "film", "a", ""], ["dull", "", "", "", ""], ["", "", "", "", ""]]
    got = bag(tf.constant(tokens)).numpy()
    rows = _rows(bag, ["a", "fine", "film", "dull"])
    np.testing.assert_allclose(got[0], np.mean([rows[w] for w in ["a", "fine", "film", "a"]],
                                               axis=0), atol=1e-6)
    np.testing.assert_allclose(got[1], rows["dull"], atol=1e-6)
    np.testing.assert_array_equal(got[2], np.zeros(6))  # no word: zeros
    # More padding, another order: the same vectors.
    reordered = bag(tf.constant([["film", "a", "a", "fine", "", "", ""],
                                 ["dull", "", "", "", "", "", ""]])).numpy()
    np.testing.assert_allclose(reordered, got[:2], atol=1e-6)
    # Words are hashed as written: another spelling is (almost surely) another row.
    assert not np.allclose(_rows(bag, ["Film"])["Film"], rows["film"])


def test_gradients_reach_only_the_rows_of_the_words_read():
    keras.utils.set_random_seed(1)
    bag = BagOfWords(dim=3, buckets=64)
    tokens = tf.constant([["x", "y", ""]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(bag(tokens))
    grad = tf.convert_to_tensor(tape.gradient(loss, bag.trainable_variables[0]))
    touched = set(np.flatnonzero(np.abs(grad.numpy()).sum(-1)))
    expected = set((tf.strings.to_hash_bucket_fast(["x", "y"], 63) + 1).numpy())
    assert touched == expected
    np.testing.assert_allclose(grad.numpy()[sorted(touched)].sum(), 3 * 1.0, atol=1e-6)


def test_padding_weighs_nothing_whatever_its_row_holds():
    keras.utils.set_random_seed(2)
    bag = BagOfWords(dim=3, buckets=64)
    tokens = tf.constant([["x", "y", ""], ["", "", ""]])
    before = bag(tokens).numpy()
    table = bag.trainable_variables[0]
    table.assign(tf.tensor_scatter_nd_update(table, [[0]], [[1e6, -1e6, 1e6]]))
    np.testing.assert_array_equal(bag(tokens).numpy(), before)


def test_config_round_trip_and_dtype_policy():
    tokens = tf.constant([["a", "b", ""], ["c", "", ""]])
    assert_serializable(BagOfWords(dim=4, buckets=128, name="words"), tokens)
    bag = BagOfWords(dim=4, dtype="mixed_bfloat16")
    out = bag(tokens)
    assert out.dtype == tf.bfloat16 and bag.trainable_variables[0].dtype == "float32"
    assert bag.compute_output_shape((2, 3)) == (2, 4)
    compiled = tf.function(lambda t: bag(t), jit_compile=False)
    np.testing.assert_array_equal(compiled(tokens), out)


def test_clear_errors():
    with pytest.raises(ValueError, match="dim must be an integer >= 1; got 0"):
        BagOfWords(dim=0)
    with pytest.raises(ValueError, match="buckets must be an integer >= 2; got 1"):
        BagOfWords(dim=4, buckets=1)
    with pytest.raises(TypeError, match=r"string tokens \[batch, time\]; got int32"):
        BagOfWords(dim=4)(tf.constant([[1, 2]]))
    with pytest.raises(ValueError, match=r"string tokens \[batch, time\]; got shape \(2,\)"):
        BagOfWords(dim=4)(tf.constant(["a", "b"]))
