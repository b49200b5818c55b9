"""Pre-training recipes and the training entry point."""

from elmo_tf.recipes.recipe import Recipe

__all__ = ["Recipe"]
