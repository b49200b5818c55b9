"""Bounding work by shape: running a function over the first axis of a tensor a bounded number
of rows at a time (or over its leading rows only), the device type that decides how many, and
the shape buckets XLA compiles for."""

import tensorflow as tf

from elmo_tf.keras_compat import eager_device_scope


def compute_device_type():
    """`"GPU"` or `"CPU"`: where ops created now run. A device scope (`tf.device`, a
    distribution strategy's replica) decides; without one, TensorFlow places them on a GPU
    when one is visible."""
    if tf.executing_eagerly():
        scope = eager_device_scope()
    else:
        scope = tf.no_op().device
    device_type = tf.DeviceSpec.from_string(scope).device_type
    if device_type:
        return "GPU" if device_type.upper() == "GPU" else "CPU"
    return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"


def map_in_chunks(fn, x, max_rows, fn_output_signature):
    """`fn` over `x` in chunks of at most `max_rows` rows, concatenated back along axis 0.

    Bounds the memory of `fn`'s intermediate tensors by the chunk, not by `x`. Every chunk has
    the same shape (the last is padded with zeros or `""`, which `fn` must accept, and the
    padding rows are dropped from the result), so it works under XLA. `x` with no rows still
    makes one call on one padding row.

    Args:
        fn: maps `[rows, ...]` to a structure of tensors with `rows` first.
        x: the tensor to split along axis 0.
        max_rows: the most rows per call.
        fn_output_signature: the structure of `tf.TensorSpec`s `fn` returns, rows axis included.

    Example:
    >>> map_in_chunks(lambda t: t * 2, tf.range(5), 2, tf.TensorSpec([None], tf.int32))
    <tf.Tensor: shape=(5,), dtype=int32, numpy=array([0, 2, 4, 6, 8], dtype=int32)>
    """
    n = tf.shape(x)[0]
    rows = tf.clip_by_value(n, 1, max_rows)
    n_chunks = tf.maximum((n + rows - 1) // rows, 1)
    chunks = _split_rows(x, n_chunks, rows)
    out = tf.map_fn(fn, chunks, parallel_iterations=1, fn_output_signature=fn_output_signature)
    return tf.nest.map_structure(
        lambda v: tf.reshape(v, tf.concat([[-1], tf.shape(v)[2:]], 0))[:n], out)


def map_leading_rows(fn, x, count, chunks, dtype=tf.float32):
    """`fn` over the first `count` rows of `x`, with static shapes: the rows in `chunks` equal
    chunks, and only the chunks that hold one of the first `count` rows computed; every other
    row's value is 0.

    Under XLA, which compiles static shapes, this makes the work follow `count` (a number
    known when the step runs: the masked LM's selected positions) rather than the rows: a loop
    of as many equal chunks as `count` needs, at most `chunks` (a static bound, which XLA's
    gradient of a loop needs), so at most one chunk's rows more than `count` are computed (and
    their values dropped).

    Args:
        fn: maps a structure like `x` of `[rows, ...]` tensors to `dtype` `[rows]`.
        x: a structure of tensors with the same first axis, of n rows.
        count: int32 scalar, at most n.
        chunks: Python int, the number of equal chunks the rows are split into (the last
            padded with zeros, which `fn` must accept).
        dtype: what `fn` returns (float32: a loss; int32: a generator's drawn words).

    Returns:
        `dtype` `[n]`: `fn`'s values on the first `count` rows, 0 on the others.

    Example:
    >>> map_leading_rows(lambda t: tf.cast(t, tf.float32) * 2, tf.range(6), 3, chunks=3)
    <tf.Tensor: shape=(6,), dtype=float32, numpy=array([0., 2., 4., 0., 0., 0.], dtype=float32)>
    """
    n = tf.shape(tf.nest.flatten(x)[0])[0]
    rows = tf.maximum((n + chunks - 1) // chunks, 1)
    parts = tf.nest.map_structure(lambda t: _split_rows(t, chunks, rows), x)
    count = tf.cast(count, tf.int32)
    needed = (count + rows - 1) // rows

    def body(i, out):
        values = fn(tf.nest.map_structure(lambda part: part[i], parts))
        return i + 1, tf.tensor_scatter_nd_update(out, [[i]], values[None])

    _, out = tf.while_loop(lambda i, _: i < needed, body,
                           (tf.constant(0), tf.zeros([chunks, rows], dtype)),
                           maximum_iterations=chunks)
    return tf.where(tf.range(n) < count, tf.reshape(out, [-1])[:n], tf.zeros([], dtype))


def _split_rows(t, chunks, rows):
    """`t` `[n, ...]` padded with zero rows to `chunks * rows` and split into
    `[chunks, rows, ...]`."""
    padding = tf.concat([[[0, chunks * rows - tf.shape(t)[0]]],
                         tf.zeros([tf.rank(t) - 1, 2], tf.int32)], 0)
    return tf.reshape(tf.pad(t, padding), tf.concat([[chunks, rows], tf.shape(t)[1:]], 0))


def shape_bucket(size):
    """The smallest of the sizes 0-8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ... (four per
    doubling: `m * 2**k` for m in 4-7) that holds `size`: XLA compiles once per shape, and
    padding to these sizes bounds both the compilations and the extra work (< 25 %)."""
    if size <= 8:
        return size
    step = 1 << (size.bit_length() - 3)
    return -(-size // step) * step
