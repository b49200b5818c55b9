"""`Perplexity`: exp of the mean token negative log-likelihood over everything seen."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="elmo_tf")
class Perplexity(keras.metrics.Metric):
    """Perplexity of a language model: `exp(sum of token NLLs / number of tokens)`.

    Every token weighs the same whatever batch it came in (a mean of per-batch perplexities
    would not be a perplexity). Under a distribution strategy the sums add up over replicas.
    Before any token is counted the result is NaN (undefined), not 1.

    Call arguments of `update_state`:
        nll_sum: sum of the natural-log negative log-likelihoods of some tokens.
        count: how many tokens that sum covers.

    Example:
    >>> metric = Perplexity(name="forward_perplexity")
    >>> metric.update_state(nll_sum=2 * math.log(4.0), count=2)
    >>> float(metric.result())
    4.0
    """

    def __init__(self, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.nll_sum = self.add_variable(shape=(), initializer="zeros", dtype="float32",
                                         aggregation="sum", name="nll_sum")
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="float32",
                                       aggregation="sum", name="count")

    def update_state(self, nll_sum, count):
        self.nll_sum.assign_add(tf.cast(nll_sum, "float32"))
        self.count.assign_add(tf.cast(count, "float32"))

    def result(self):
        # The perplexity of no tokens is undefined: NaN, not exp(0) = 1.
        return tf.where(self.count > 0, tf.exp(tf.math.divide_no_nan(self.nll_sum, self.count)),
                        float("nan"))
