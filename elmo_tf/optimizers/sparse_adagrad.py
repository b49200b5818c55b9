"""`SparseAdagrad`: Adagrad with bilm-tf's row-sparse updates and clipping of the summed
gradient."""

import keras
import tensorflow as tf

from elmo_tf.optimizers.replica_sum_clipping import ReplicaSumClipping


@keras.saving.register_keras_serializable(package="elmo_tf")
class SparseAdagrad(ReplicaSumClipping, keras.optimizers.Adagrad):
    """`keras.optimizers.Adagrad`'s update, made as bilm-tf's TF1 training made it.

    The arithmetic is Keras's: `accumulator += g**2; variable -= lr * g / sqrt(accumulator +
    epsilon)`. Two things differ:

    * A row-sparse gradient (`tf.IndexedSlices`: the sampled softmax's gradient of its `[V, P]`
      kernel, an embedding lookup's) updates only the rows it touches, after summing the
      gradients of rows that appear more than once, as TF1's sparse Adagrad did. Keras densifies
      it and takes the square root of the whole accumulator every step, several times slower
      for the released 793k-word softmax (docs/benchmarks.md). Rows a step does not touch
      are unchanged either way (a zero gradient leaves both the accumulator and the weights as
      they are), so the results are the same. (Under `mixed_float16`, Keras's
      `LossScaleOptimizer` still densifies the gradient to check that it is finite.)
    * `global_clipnorm` clips the gradient summed over the replicas of a `tf.distribute`
      strategy, as bilm-tf clipped the average of its GPUs' gradients. Keras clips each
      replica's part before the sum, so N replicas would not train as one replica on the same
      global batch. The norm is that of the summed, deduplicated gradient. `clipnorm` and
      `clipvalue` (per variable) keep Keras's meaning.

    Args:
        learning_rate, initial_accumulator_value, epsilon, global_clipnorm, and the rest:
            as `keras.optimizers.Adagrad`.

    Example:
    >>> optimizer = SparseAdagrad(0.2, initial_accumulator_value=1.0, global_clipnorm=10.0)
    >>> language_model.compile(optimizer=optimizer)   # bilm-tf's (the released shapes' recipes)
    """

    def update_step(self, gradient, variable, learning_rate):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        # Rows are unique (`_deduplicated`) but for padding rows, whose values are zero: adding
        # their zero squares and zero steps leaves the rows they name as they are.
        accumulator = self._accumulators[self._get_variable_index(variable)]
        values = tf.cast(gradient.values, variable.dtype)
        self.assign_add(accumulator, tf.IndexedSlices(tf.square(values), gradient.indices,
                                                      gradient.dense_shape))
        rows = tf.gather(accumulator.value, gradient.indices)
        step = tf.cast(learning_rate, variable.dtype) * values / tf.sqrt(rows + self.epsilon)
        self.assign_sub(variable, tf.IndexedSlices(step, gradient.indices, gradient.dense_shape))
