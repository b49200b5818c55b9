import numpy as np
import tensorflow as tf

from elmo_tf.ops.chunking import compute_device_type, map_in_chunks, shape_bucket


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
