import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import tokens_to_char_ids
from tests import reference

EDGE_TOKENS = [
    "A", "hello", "wörld", "東京", "🙂", "<S>", "</S>", "<s>", "x" * 47, "x" * 48, "x" * 49,
    "y" * 60, "z" * 47 + "北",  # truncation keeps only the first byte of 北
    "é" * 30,  # 60 bytes cut inside a character
]


def test_every_edge_token_matches_the_bilm_tf_encoding():
    ids = tokens_to_char_ids([EDGE_TOKENS]).numpy()[0]
    for token, row in zip(EDGE_TOKENS, ids):
        assert row.tolist() == reference.char_ids(token), token


def test_truncation_splits_a_multibyte_character_and_ends_with_end_of_word():
    row = tokens_to_char_ids([["z" * 47 + "北"]]).numpy()[0, 0]
    assert row[48] == 0xE5 + 1 and row[49] == 260  # first byte of 北 (e5 8c 97), then EOW


def test_padding_token_is_an_all_zero_row_and_boundaries_have_their_ids():
    ids = tokens_to_char_ids([["<S>", "</S>", ""]]).numpy()[0]
    assert ids[0, :4].tolist() == [259, 257, 260, 261]
    assert ids[1, :4].tolist() == [259, 258, 260, 261]
    assert not ids[2].any()


def test_ragged_python_lists_and_dense_tensors_agree():
    ragged = tf.ragged.constant([["a", "bc"], ["d"]])
    expected = tokens_to_char_ids(tf.constant([["a", "bc"], ["d", ""]]))
    np.testing.assert_array_equal(tokens_to_char_ids(ragged), expected)
    np.testing.assert_array_equal(tokens_to_char_ids([["a", "bc"], ["d"]]), expected)


def test_numpy_string_arrays_are_tokens_too():
    expected = tokens_to_char_ids([["a", "bc"]])
    np.testing.assert_array_equal(tokens_to_char_ids(np.array([["a", "bc"]])), expected)
    np.testing.assert_array_equal(tokens_to_char_ids(np.array([[b"a", b"bc"]], object)), expected)


def test_empty_inputs_keep_their_shape():
    assert tokens_to_char_ids([]).shape == (0, 0, 50)
    assert tokens_to_char_ids([[]]).shape == (1, 0, 50)
    assert tokens_to_char_ids(tf.zeros([3, 0], tf.string)).shape == (3, 0, 50)


def test_works_in_tf_data_and_in_a_graph():
    ds = tf.data.Dataset.from_tensor_slices(tf.constant([["a", "b"], ["c", ""]]))
    from_data = np.stack([x.numpy() for x in ds.map(tokens_to_char_ids)])
    graph = tf.function(tokens_to_char_ids, input_signature=[tf.TensorSpec([None, None], tf.string)])
    np.testing.assert_array_equal(from_data, graph(tf.constant([["a", "b"], ["c", ""]])))


def test_only_core_string_ops_in_the_graph():
    graph = tf.function(tokens_to_char_ids).get_concrete_function(
        tf.TensorSpec([None, None], tf.string)).graph
    op_types = {op.type for op in graph.get_operations()}
    assert "DecodePaddedRaw" in op_types
    assert not [t for t in op_types if "TFText" in t or "Unicode" in t]


def test_other_max_characters_per_token():
    ids = tokens_to_char_ids([["abcdefgh"]], max_characters_per_token=6).numpy()[0, 0]
    assert ids.tolist() == [259, 98, 99, 100, 101, 260]


@pytest.mark.parametrize("bad, match", [
    ([["a", 3]], r"tokens\[0\]\[1\] is int 3"),
    (tf.constant([[1, 2]]), "got dtype int32"),
    (tf.ragged.constant([[1.0]]), "RaggedTensor of float32"),
    (np.array([[1, 2]]), "NumPy array of int64"),
])
def test_non_string_tokens_get_clear_errors(bad, match):
    with pytest.raises(TypeError, match=match):
        tokens_to_char_ids(bad)
