"""Training: pre-training runs with `model.fit` (`train`, `evaluate`), their directories,
checkpoints and distribution strategies."""

from elmo_tf.models.compiled_step import XLA_MODES, use_xla
from elmo_tf.training.distribution import STRATEGIES, make_strategy
from elmo_tf.training.pretraining import (
    MIXED_PRECISION,
    build_language_model,
    evaluate,
    evaluate_language_model,
    train,
)
from elmo_tf.training.run_directory import RunDirectory

__all__ = ["MIXED_PRECISION", "RunDirectory", "STRATEGIES", "XLA_MODES", "build_language_model",
           "evaluate", "evaluate_language_model", "make_strategy", "train", "use_xla"]
