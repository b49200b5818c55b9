"""`BagOfWords` of `HashedWords`: the mean of one row per real word, whatever the padding and
the order; row sharing by word; gradients only to the rows read; config, dtype policy, XLA (the
bag), clear errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers.bag_of_words import BagOfWords
from elmo_tf.layers.hashed_words import HashedWords
from tests.conftest import assert_serializable


def _bag(bag, tokens):
    """The bag of `tokens` (strings `[batch, time]`), hashed into the bag's buckets."""
    return bag(HashedWords(bag.buckets)(tf.constant(tokens)))


def _rows(bag, words):
    """Each word's own vector: the layer on one-word sentences."""
    return {w: _bag(bag, [[w]]).numpy()[0] for w in words}


def test_the_mean_of_each_real_words_vector_padding_and_order_aside():
    keras.utils.set_random_seed(0)
    bag = BagOfWords(dim=6)
    tokens = [["a", "fine", "film", "a", ""], ["dull", "", "", "", ""], ["", "", "", "", ""]]
    got = _bag(bag, tokens).numpy()
    rows = _rows(bag, ["a", "fine", "film", "dull"])
    np.testing.assert_allclose(got[0], np.mean([rows[w] for w in ["a", "fine", "film", "a"]],
                                               axis=0), atol=1e-6)
    np.testing.assert_allclose(got[1], rows["dull"], atol=1e-6)
    np.testing.assert_array_equal(got[2], np.zeros(6))  # no word: zeros
    # More padding, another order: the same vectors.
    reordered = _bag(bag, [["film", "a", "a", "fine", "", "", ""],
                           ["dull", "", "", "", "", "", ""]]).numpy()
    np.testing.assert_allclose(reordered, got[:2], atol=1e-6)
    # Words are hashed as written: another spelling is (almost surely) another row.
    assert not np.allclose(_rows(bag, ["Film"])["Film"], rows["film"])


def test_gradients_reach_only_the_rows_of_the_words_read():
    keras.utils.set_random_seed(1)
    bag = BagOfWords(dim=3, buckets=64)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(_bag(bag, [["x", "y", ""]]))
    grad = tf.convert_to_tensor(tape.gradient(loss, bag.trainable_variables[0]))
    touched = set(np.flatnonzero(np.abs(grad.numpy()).sum(-1)))
    expected = set((tf.strings.to_hash_bucket_fast(["x", "y"], 63) + 1).numpy())
    assert touched == expected
    np.testing.assert_allclose(grad.numpy()[sorted(touched)].sum(), 3 * 1.0, atol=1e-6)


def test_padding_weighs_nothing_whatever_its_row_holds():
    keras.utils.set_random_seed(2)
    bag = BagOfWords(dim=3, buckets=64)
    tokens = [["x", "y", ""], ["", "", ""]]
    assert HashedWords(64)(tf.constant(tokens)).numpy().tolist()[1] == [0, 0, 0]
    before = _bag(bag, tokens).numpy()
    table = bag.trainable_variables[0]
    table.assign(tf.tensor_scatter_nd_update(table, [[0]], [[1e6, -1e6, 1e6]]))
    np.testing.assert_array_equal(_bag(bag, tokens).numpy(), before)


def test_config_round_trip_dtype_policy_and_xla():
    tokens = tf.constant([["a", "b", ""], ["c", "", ""]])
    assert_serializable(HashedWords(buckets=128, name="ids"), tokens)
    ids = HashedWords()(tokens)
    assert ids.dtype == tf.int32
    assert_serializable(BagOfWords(dim=4, buckets=128, name="words"), ids % 128)
    bag = BagOfWords(dim=4, dtype="mixed_bfloat16")
    out = bag(ids)
    assert out.dtype == tf.bfloat16 and bag.trainable_variables[0].dtype == "float32"
    assert bag.compute_output_shape((2, 3)) == (2, 4)
    compiled = tf.function(lambda t: bag(t), jit_compile=True)  # numbers only: it compiles
    # (bfloat16 sums, which XLA adds in another order: a few bfloat16 steps apart at most; a
    # step is 2.4e-4 at these outputs' size, under 0.06.)
    np.testing.assert_allclose(np.float32(compiled(ids)), np.float32(out), rtol=0, atol=1e-3)
    assert bag.supports_jit and not HashedWords().supports_jit


def test_string_tokens_are_hashed_as_hashed_words_does():
    """A bag called on string tokens (as before HashedWords, and `.keras` files of then) is the
    bag of their HashedWords ids; it then says it does not compile with XLA."""
    keras.utils.set_random_seed(3)
    bag = BagOfWords(dim=5, buckets=256)
    tokens = [["a", "fine", "film"], ["dull", "", ""]]
    by_ids = _bag(bag, tokens).numpy()
    assert bag.supports_jit
    np.testing.assert_array_equal(bag(tf.constant(tokens)).numpy(), by_ids)
    assert not bag.supports_jit


def test_clear_errors():
    with pytest.raises(ValueError, match="dim must be an integer >= 1; got 0"):
        BagOfWords(dim=0)
    with pytest.raises(ValueError, match="buckets must be an integer >= 2; got 1"):
        BagOfWords(dim=4, buckets=1)
    with pytest.raises(ValueError, match="HashedWords's buckets must be an integer >= 2; got 1"):
        HashedWords(buckets=1)
    with pytest.raises(TypeError, match=r"integer word ids \(HashedWords's\) or string tokens "
                                        r"\[batch, time\]; got float32"):
        BagOfWords(dim=4)(tf.constant([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"word ids or string tokens \[batch, time\]; got shape "
                                         r"\(2,\)"):
        BagOfWords(dim=4)(tf.constant([1, 2]))
    with pytest.raises(TypeError, match=r"string tokens \[batch, time\]; got int32"):
        HashedWords()(tf.constant([[1, 2]]))
    with pytest.raises(ValueError, match=r"string tokens \[batch, time\]; got shape \(2,\)"):
        HashedWords()(tf.constant(["a", "b"]))
