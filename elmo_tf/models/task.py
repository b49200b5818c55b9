"""`Task`: a backbone trained for an objective with `fit`, and what every such model shares."""

import keras

from elmo_tf.keras_compat import FitWorkarounds
from elmo_tf.models.backbone import with_backbone_object


class Task(FitWorkarounds, keras.Model):
    """A model that trains a `Backbone` for an objective (KerasHub's Task): ELMo's biLM
    pre-training (`ElmoLanguageModel`), Masked ELMo's (`MaskedElmoLanguageModel`); the
    downstream tasks next.

    What every task shares, in one place:

    * `backbone`: the backbone it trains, serialized with it (`get_config`/`from_config`).
    * XLA follows Keras's `jit_compile="auto"`: on with one GPU, off on a CPU and under a
      distribution strategy. Every op of the recurrent backbones' steps compiles (tests run
      `fit` with `jit_compile=True` on the CPU), and on an H100 XLA made ELMo's pre-training
      step 2.3x faster (elmo_original, 384 x 20 tokens, TF32: 0.104 s against 0.241 s a step,
      after 60 s of compilation instead of 10; `bench/results/gpu.json`).
    * Keras workarounds for distributed training (`keras_compat.FitWorkarounds`).

    Args:
        backbone: the `Backbone` to train.
    """

    def __init__(self, backbone, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone

    def reset_states(self):
        """Clears a stateful backbone's carried state."""
        self.backbone.reset_states()

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "backbone": keras.saving.serialize_keras_object(self.backbone)}

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone_object(config))

