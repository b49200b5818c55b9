import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import tokens_to_char_ids
from elmo_tf.layers import CharCNN
from tests import reference
from tests.conftest import assert_serializable

FILTERS = [[1, 4], [2, 6], [3, 8]]
TOKENS = [["Hello", "wörld", "x" * 60, ""], ["<S>", "a", "", ""]]


def _cnn_with_reference_weights(activation, seed=0):
    options = reference.random_options(filters=FILTERS, activation=activation)
    weights = reference.random_weights(options, seed=seed)
    cnn = CharCNN(FILTERS, embedding_dim=4, activation=activation)
    cnn.build((None, None, 50))
    cnn.char_embed.assign(weights["char_embed"])
    for i in range(len(FILTERS)):
        cnn.kernels[i].assign(weights[f"CNN/W_cnn_{i}"][0])
        cnn.biases[i].assign(weights[f"CNN/b_cnn_{i}"])
    return cnn, weights, options


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_matches_numpy_float64_reference(activation):
    cnn, weights, options = _cnn_with_reference_weights(activation)
    ids = tokens_to_char_ids(TOKENS)
    got = cnn(ids).numpy()
    assert got.shape == (2, 4, 18)
    expected = reference.char_cnn(ids.numpy().reshape(-1, 50), weights, options).reshape(2, 4, 18)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_padding_token_embeds_deterministically_from_the_bias():
    cnn, weights, options = _cnn_with_reference_weights("relu")
    out = cnn(tf.zeros([1, 1, 50], tf.int32)).numpy()[0, 0]
    expected = np.maximum(np.concatenate([weights[f"CNN/b_cnn_{i}"] for i in range(3)]), 0)
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_empty_batch():
    cnn, _, _ = _cnn_with_reference_weights("relu")
    assert cnn(tf.zeros([0, 3, 50], tf.int32)).shape == (0, 3, 18)


def test_mixed_precision_policy_is_respected():
    cnn = CharCNN(FILTERS, embedding_dim=4, dtype="mixed_bfloat16")
    out = cnn(tokens_to_char_ids(TOKENS))
    assert out.dtype == tf.bfloat16 and cnn.char_embed.dtype == "float32"


def test_mixed_bfloat16_sums_the_char_embedding_gradient_in_float32():
    """The lookup's gradient adds up each char's rows: in bfloat16 a GPU does that scatter-add
    as a compare-and-swap loop, so it stays float32 (no bfloat16 segment sum in the graph)."""
    cnn = CharCNN(filters=[[1, 8], [2, 8]], embedding_dim=4, dtype="mixed_bfloat16")
    ids = tf.constant(tokens_to_char_ids([["a", "cat"], ["sat", ""]]))
    cnn(ids)

    @tf.function
    def grads(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(cnn(ids), tf.float32) ** 2)
        return tape.gradient(loss, cnn.trainable_weights)

    graph = grads.get_concrete_function(ids).graph.as_graph_def()
    sums = [node.attr["T"].type for node in
            list(graph.node) + [n for f in graph.library.function for n in f.node_def]
            if node.op in ("UnsortedSegmentSum", "ScatterAdd", "TensorScatterAdd")]
    assert sums and tf.bfloat16.as_datatype_enum not in sums
    gradient = grads(ids)[0]
    assert gradient.dtype == tf.float32 and np.abs(gradient.numpy()).sum() > 0


def test_gradients_reach_every_weight():
    cnn, _, _ = _cnn_with_reference_weights("tanh")
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(cnn(tokens_to_char_ids(TOKENS)) ** 2)
    grads = tape.gradient(loss, cnn.trainable_weights)
    assert all(g is not None and np.abs(tf.convert_to_tensor(g)).sum() > 0 for g in grads)


def test_config_round_trip_and_errors():
    restored = assert_serializable(CharCNN(FILTERS, embedding_dim=4, activation="tanh",
                                           dtype="mixed_bfloat16"), tokens_to_char_ids(TOKENS))
    assert restored.output_dim == 18
    with pytest.raises(ValueError, match="activation must be one of"):
        CharCNN(FILTERS, embedding_dim=4, activation="gelu")
    with pytest.raises(ValueError, match="filter width 7 exceeds the 5 chars"):
        CharCNN([[7, 2]], embedding_dim=4).build((None, None, 5))


def test_xla():
    cnn, _, _ = _cnn_with_reference_weights("relu")
    ids = tokens_to_char_ids(TOKENS)
    np.testing.assert_allclose(tf.function(cnn, jit_compile=True)(ids), cnn(ids), atol=1e-5)


@pytest.mark.parametrize("tokens_per_chunk", [1, 3, 8])
def test_result_and_gradients_do_not_depend_on_the_chunking(monkeypatch, tokens_per_chunk):
    """The memory budget only decides how many tokens go through at once."""
    from elmo_tf.layers import char_cnn

    cnn, _, _ = _cnn_with_reference_weights("relu")
    ids = tokens_to_char_ids(TOKENS)  # 8 tokens

    def run():
        with tf.GradientTape() as tape:
            out = cnn(ids)
            loss = tf.reduce_sum(out * tf.range(1.0, 1.0 + float(out.shape[-1])))
        return out, tape.gradient(loss, cnn.trainable_weights)

    whole, whole_grads = run()
    assert cnn.tokens_per_chunk("CPU") >= 8 and cnn.tokens_per_chunk("GPU") >= 8
    itemsize = 4
    per_token = itemsize * (50 * 4 + sum((50 - w + 1) * (w * 4 + n) for w, n in FILTERS))
    budget = per_token * tokens_per_chunk + per_token // 2  # room for the tokens, not one more
    monkeypatch.setitem(char_cnn.CHUNK_BYTES, "CPU", budget)
    monkeypatch.setitem(char_cnn.CHUNK_BYTES, "GPU", budget)
    assert cnn.tokens_per_chunk("CPU") == tokens_per_chunk
    chunked, chunked_grads = run()
    np.testing.assert_allclose(chunked, whole, rtol=1e-6, atol=1e-6)
    for a, b in zip(chunked_grads, whole_grads):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), rtol=1e-5,
                                   atol=1e-5)


def test_chunks_are_sized_by_the_device_memory_budget():
    """The released CNN (~450 kB of float32 intermediates per token): tens of tokens at a time
    on a CPU, thousands on a GPU; twice as many in bfloat16."""
    from elmo_tf.models.elmo.elmo_config import ElmoConfig

    config = ElmoConfig.from_preset("original")
    cnn = CharCNN(config.filters, config.char_embedding_dim)
    per_token = 4 * (50 * 16 + sum((50 - w + 1) * (w * 16 + n) for w, n in config.filters))
    assert 440_000 < per_token < 460_000
    assert cnn.tokens_per_chunk("CPU") == (14 << 20) // per_token == 32
    assert cnn.tokens_per_chunk("GPU") == (1 << 30) // per_token  # 2,380
    bf16 = CharCNN(config.filters, config.char_embedding_dim, dtype="mixed_bfloat16")
    assert bf16.tokens_per_chunk("GPU") == (1 << 30) // (per_token // 2)
