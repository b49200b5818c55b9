"""`Adam`: Adam with lazy row-sparse updates and `global_clipnorm` on the gradient summed over
replicas."""

import keras
import tensorflow as tf

from elmo_tf.optimizers.replica_sum_clipping import ReplicaSumClipping, sorted_runs


@keras.saving.register_keras_serializable(package="elmo_tf")
class Adam(ReplicaSumClipping, keras.optimizers.Adam):
    """`keras.optimizers.Adam`, with two changes for a language model's sampled softmax:

    * A row-sparse gradient (`tf.IndexedSlices`: the sampled softmax's gradient of its `[V, P]`
      kernel and bias) updates only the rows it touches, their moments included ("lazy" Adam,
      as TF Addons' `LazyAdam`; rows that appear more than once are summed first). Keras
      densifies it, so a word's row goes on moving on its stale momentum for steps after it
      was last sampled, and the rare words' logits drift up (the full softmax's perplexity then
      rises while the sampled loss falls). Dense gradients get Keras's update.
    * `global_clipnorm` clips the gradient summed over the replicas of a `tf.distribute`
      strategy (`ReplicaSumClipping`), so N replicas train as one replica on the same global
      batch.

    The optimizer of the recipes with `"optimizer": "adam"` (`elmo_cpu`: a small budget, where
    bilm-tf's Adagrad learns too slowly).

    Args:
        learning_rate, beta_1, beta_2, epsilon, global_clipnorm, and the rest: as
            `keras.optimizers.Adam` (`amsgrad` densifies, as Keras does).

    Example:
    >>> language_model.compile(optimizer=Adam(2e-3, global_clipnorm=10.0))
    """

    def update_step(self, gradient, variable, learning_rate):
        if not isinstance(gradient, tf.IndexedSlices) or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        alpha = (tf.cast(learning_rate, dtype) * tf.sqrt(1 - tf.pow(beta_2, step))
                 / (1 - tf.pow(beta_1, step)))
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        # `_deduplicated` sums repeated rows into each row's first entry and pads with zero rows
        # that repeat real ones: only a row's first entry may update it.
        indices = gradient.indices
        order, _, first_sorted = sorted_runs(indices)
        first = tf.scatter_nd(order[:, None], first_sorted, tf.shape(indices))
        values = tf.cast(gradient.values, dtype)
        keep = tf.reshape(tf.cast(first, dtype), [-1] + [1] * (values.shape.rank - 1))
        m_rows, v_rows = tf.gather(m.value, indices), tf.gather(v.value, indices)
        new_m = m_rows + (values - m_rows) * (1 - beta_1)
        new_v = v_rows + (tf.square(values) - v_rows) * (1 - beta_2)
        shape = gradient.dense_shape
        self.assign_add(m, tf.IndexedSlices((new_m - m_rows) * keep, indices, shape))
        self.assign_add(v, tf.IndexedSlices((new_v - v_rows) * keep, indices, shape))
        update = alpha * new_m / (tf.sqrt(new_v) + self.epsilon) * keep
        self.assign_sub(variable, tf.IndexedSlices(update, indices, shape))
