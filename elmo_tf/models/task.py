"""`Task`: the base of every model that trains a backbone with `fit`, pre-training and
downstream."""

from elmo_tf.keras_compat import FitWorkarounds


class Task(FitWorkarounds):
    """Base of every task (KerasHub's Task): the pre-training tasks (`LanguageModel`:
    `ElmoLanguageModel`, `MaskedElmoLanguageModel`) and the downstream ones (`DownstreamTask`:
    `TextClassifier`, `SentencePairClassifier`, `SequenceTagger`).

    A task combines it with `keras.Model` (`class MyTask(Task, keras.Model)`): a mixin, not a
    `keras.Model` subclass, because Keras rewrites the bases of a functional model's classes
    (`inject_functional_model_class` puts `Functional` in place of `keras.Model`), which would
    turn every subclassed task that shares a Model base with the functional downstream tasks
    into a functional one.

    What every task shares, in one place:

    * `backbone`: the `Backbone` it trains (a downstream task's is its embedding's).
    * Keras workarounds for distributed training (`keras_compat.FitWorkarounds`).
    * XLA follows Keras's `jit_compile="auto"`: on with one GPU, off on a CPU and under a
      distribution strategy. Every op of the recurrent backbones' steps compiles (tests run
      `fit` with `jit_compile=True` on the CPU; figures in `docs/benchmarks.md`).
    """

    def reset_states(self):
        """Clears a stateful backbone's carried state."""
        self.backbone.reset_states()
