"""Optimizers."""

from elmo_tf.optimizers.sparse_adagrad import SparseAdagrad

__all__ = ["SparseAdagrad"]
