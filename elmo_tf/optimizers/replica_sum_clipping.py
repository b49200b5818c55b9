"""`ReplicaSumClipping`: a Keras optimizer's `global_clipnorm` applied to the gradient summed
over the replicas of a `tf.distribute` strategy, row-sparse gradients deduplicated first."""

import tensorflow as tf

from elmo_tf.keras_compat import SummedGradientsHook


class ReplicaSumClipping(SummedGradientsHook):
    """Mixin for a Keras optimizer (first among the bases): `global_clipnorm` clips the gradient
    summed over the replicas, as bilm-tf clipped the average of its GPUs' gradients.

    Keras clips each replica's part before the sum, so N replicas would not train as one replica
    on the same global batch. Here the norm is that of the summed gradient, with the rows of a
    row-sparse gradient (`tf.IndexedSlices`) summed where they repeat (so its norm is the dense
    one). `clipnorm` and `clipvalue` (per variable) keep Keras's meaning.

    Example:
    >>> class MyAdam(ReplicaSumClipping, keras.optimizers.Adam):
    ...     pass
    """

    def transform_summed_gradients(self, grads):
        grads = [_deduplicated(g) for g in grads]
        if self.global_clipnorm:
            grads = _clipped_by_global_norm(grads, self.global_clipnorm)
        return grads


def _deduplicated(gradient):
    """An `IndexedSlices` with each row once (the values of repeated rows summed), padded to
    its original length with zero rows (static shapes, as XLA needs: `tf.unique` has none);
    any other gradient as it is."""
    if not isinstance(gradient, tf.IndexedSlices):
        return gradient
    order, indices, starts = sorted_runs(gradient.indices)
    n = tf.shape(indices)[0]
    segments = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # the unique row of each sorted entry
    values = tf.math.unsorted_segment_sum(tf.gather(gradient.values, order), segments, n)
    # Padding segments (past the number of unique rows) hold zeros; they keep naming the sorted
    # rows they started from (real rows, spread out: no pile-up of zero updates on one row).
    unique = tf.tensor_scatter_nd_update(indices, segments[:, None], indices)
    return tf.IndexedSlices(values, unique, gradient.dense_shape)


def sorted_runs(indices):
    """`(order, sorted, starts)`: the stable sort of the 1-D `indices`, and whether each sorted
    entry is the first of its run of equal indices."""
    order = tf.argsort(indices, stable=True)
    sorted_indices = tf.gather(indices, order)
    starts = tf.concat([tf.ones([tf.minimum(tf.size(indices), 1)], tf.bool),
                        tf.not_equal(sorted_indices[1:], sorted_indices[:-1])], 0)
    return order, sorted_indices, starts


def _clipped_by_global_norm(grads, clip_norm):
    """`grads` scaled by `min(1, clip_norm / global norm)`, `IndexedSlices` kept sparse (their
    rows must be unique for the norm to be the dense one). A non-finite norm makes every
    gradient NaN, as Keras's clip does, so `TerminateOnNaN` stops the run."""
    parts = [g.values if isinstance(g, tf.IndexedSlices) else g for g in grads]
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(p, tf.float32))) for p in parts]))
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)

    def scaled(g):
        if isinstance(g, tf.IndexedSlices):
            return tf.IndexedSlices(g.values * tf.cast(scale, g.dtype), g.indices, g.dense_shape)
        return g * tf.cast(scale, g.dtype)

    return [scaled(g) for g in grads]
