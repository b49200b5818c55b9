"""`ReplicaSumClipping`: a Keras optimizer's `global_clipnorm` applied to the gradient summed
over the replicas of a `tf.distribute` strategy, row-sparse gradients deduplicated first."""

import keras
import tensorflow as tf


class ReplicaSumClipping:
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

    def _clip_gradients(self, grads):
        if self.global_clipnorm:
            return grads  # after the cross-replica sum, in `_backend_update_step`
        return super()._clip_gradients(grads)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # Keras's TensorFlow `_backend_update_step` (sum over replicas, then one update per
        # variable on every device), with deduplication and the global clip in between.
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        pairs = list(self._all_reduce_sum_gradients(list(zip(grads, variables))))
        grads = [_deduplicated(g) for g, _ in pairs]
        if self.global_clipnorm:
            grads = _clipped_by_global_norm(grads, self.global_clipnorm)
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_tf_update_step, self._distribution_strategy,
            list(zip(grads, (v for _, v in pairs))), learning_rate)


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
