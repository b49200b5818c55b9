"""Training metrics."""

from elmo_tf.metrics.perplexity import Perplexity

__all__ = ["Perplexity"]
