"""Pre-training recipes: everything that defines a run, by name or from a JSON file (the
trainer is `elmo_tf.training`)."""

from elmo_tf.recipes.recipe import Recipe

__all__ = ["Recipe"]
