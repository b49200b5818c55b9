"""`Task`: the base of every model that trains a backbone with `fit`, pre-training and
downstream."""

from elmo_tf.keras_compat import FitWorkarounds
from elmo_tf.models.compiled_step import CompiledStep


class Task(FitWorkarounds, CompiledStep):
    """Base of every task (KerasHub's Task): the pre-training tasks (`LanguageModel`:
    `ElmoLanguageModel`, `MaskedElmoLanguageModel`) and the downstream ones (`DownstreamTask`:
    `TextClassifier`, `SentencePairClassifier`, `SequenceTagger`).

    A task combines it with a model class: `keras.Model` for the pre-training tasks
    (`class MyTask(Task, keras.Model)`), KerasHub's task classes for the downstream ones
    (`DownstreamTask`). A mixin, not a `keras.Model` subclass, because Keras rewrites the bases
    of a functional model's classes (`inject_functional_model_class` puts `Functional` in
    place of `keras.Model`), which would turn every subclassed task that shares a Model base
    with the functional downstream tasks into a functional one.

    What every task shares, in one place:

    * `backbone`: the `Backbone` it trains (a downstream task's is its embedding's).
    * Keras workarounds for distributed training (`keras_compat.FitWorkarounds`).
    * XLA per replica (`CompiledStep`): `compile(..., xla=True)` compiles each replica's
      training step, with or without a distribution strategy (`elmo-tf train --xla`, on by
      default on GPUs). Every op of the recurrent backbones' steps compiles, on a CPU too.
    """

    def reset_states(self):
        """Clears a stateful backbone's carried state."""
        self.backbone.reset_states()
