"""Optimizers."""

from elmo_tf.optimizers.adam import Adam
from elmo_tf.optimizers.sparse_adagrad import SparseAdagrad

__all__ = ["Adam", "SparseAdagrad"]
