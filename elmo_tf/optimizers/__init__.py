"""Optimizers."""

from elmo_tf.optimizers.adam import Adam
from elmo_tf.optimizers.sparse_adagrad import SparseAdagrad
from elmo_tf.optimizers.warmup_linear_decay import WarmupLinearDecay

__all__ = ["Adam", "SparseAdagrad", "WarmupLinearDecay"]
