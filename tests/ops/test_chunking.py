import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.ops.chunking import compute_device_type, map_in_chunks, map_leading_rows, shape_bucket


def test_shape_buckets_bound_the_padding_and_the_number_of_shapes():
    buckets = [shape_bucket(n) for n in range(2000)]
    assert buckets[:9] == list(range(9)) and buckets[9] == 10 and buckets[20] == 20
    assert all(b >= n and b < 1.25 * n + 1 for n, b in enumerate(buckets))
    assert buckets == sorted(buckets) and all(shape_bucket(b) == b for b in buckets)
    for k in range(3, 10):  # four sizes per doubling
        assert len({b for b in buckets if 2 ** k < b <= 2 ** (k + 1)}) == 4


def test_map_in_chunks_pads_the_last_chunk_and_drops_the_padding():
    x = tf.reshape(tf.range(14.0), [7, 2])
    seen = []

    def fn(rows):
        seen.append(rows.shape[0])
        return rows * 2.0

    np.testing.assert_array_equal(map_in_chunks(fn, x, 3, tf.TensorSpec([None, 2])), x * 2.0)
    assert seen == [3, 3, 3]  # equal chunks (the last padded), as XLA needs


@pytest.mark.parametrize("count, chunks_computed", [(0, 0), (1, 1), (3, 1), (4, 2), (10, 4)])
def test_map_leading_rows_computes_only_the_chunks_the_leading_rows_fill(count,
                                                                         chunks_computed):
    x = tf.reshape(tf.range(20.0), [10, 2])  # 4 chunks of 3 rows, the last padded
    seen = []

    def fn(rows):
        seen.append(rows.shape[0])
        return tf.reduce_sum(rows, 1)

    got = map_leading_rows(fn, x, tf.constant(count), chunks=4)
    assert seen == [3] * chunks_computed
    np.testing.assert_array_equal(got, np.where(np.arange(10) < count, x.numpy().sum(1), 0.0))


@pytest.mark.parametrize("n, count", [(0, 0), (3, 2), (3, 3)])
def test_map_leading_rows_with_fewer_rows_than_chunks_and_a_structure(n, count):
    ids = tf.range(n)  # an int part beside a float one, as the sampled softmax passes them
    values = tf.cast(tf.range(n), tf.float32) * 0.5
    got = map_leading_rows(lambda rows: rows[1] + tf.cast(rows[0], tf.float32), (ids, values),
                           tf.constant(count), chunks=8)
    np.testing.assert_array_equal(got, np.where(np.arange(n) < count, 1.5 * np.arange(n), 0.0))


def test_map_leading_rows_compiles_with_xla_and_differentiates():
    """XLA's gradient of a loop needs a static bound on its iterations (`chunks`); the number
    of chunks computed is known only when the step runs."""
    x = tf.random.stateless_normal([11, 3], seed=[1, 2])
    weights = tf.Variable(tf.random.stateless_normal([3], seed=[3, 4]))

    def loss(count):
        with tf.GradientTape() as tape:
            values = map_leading_rows(lambda rows: tf.tanh(rows @ weights[:, None])[:, 0], x,
                                      count, chunks=4)
            total = tf.reduce_sum(values)
        return values, tape.gradient(total, weights)

    compiled = tf.function(loss, jit_compile=True)
    for count in (0, 5, 11):
        values, gradient = compiled(tf.constant(count))
        computed = np.arange(11) < count
        with tf.GradientTape() as tape:
            expected = tf.where(computed, tf.tanh(x @ weights[:, None])[:, 0], 0.0)
            total = tf.reduce_sum(expected)
        np.testing.assert_allclose(values, expected, rtol=1e-6)
        np.testing.assert_allclose(gradient, tape.gradient(total, weights), rtol=1e-5,
                                   atol=1e-5)


def test_device_type_follows_the_device_scope_eagerly_and_while_tracing():
    with tf.device("/CPU:0"):
        assert compute_device_type() == "CPU"
    with tf.device("/GPU:0"):
        assert compute_device_type() == "GPU"
    seen = []

    @tf.function
    def traced():
        for device in ("/CPU:0", "/GPU:0"):
            with tf.device(device):
                seen.append(compute_device_type())
        return tf.constant(0)

    traced()
    assert seen == ["CPU", "GPU"]
