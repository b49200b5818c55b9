"""`Task`: a backbone trained for an objective with `fit`, and what every such model shares."""

import keras
import tensorflow as tf

from elmo_tf.models.backbone import with_backbone_object


class Task(keras.Model):
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
    * Keras workarounds for distributed training: no symbolic build from a data batch once the
      model is built (Keras averages the int inputs across workers under
      MultiWorkerMirroredStrategy, keras-team/keras#20329), and step logs of shape `[1]` under
      multi-worker (its log reduction takes a mean over axis 0, keras-team/keras#20585).

    Args:
        backbone: the `Backbone` to train.
    """

    def __init__(self, backbone, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone

    def train_step(self, data):
        return _multi_worker_logs(super().train_step(data))

    def test_step(self, data):
        return _multi_worker_logs(super().test_step(data))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        compiled = [getattr(self, name, None) for name in ("_compile_metrics", "_compile_loss")]
        if all(layer.built for layer in self._flatten_layers()) \
                and all(c is None or c.built for c in compiled):
            iterator = data_batch = None
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def reset_states(self):
        """Clears a stateful backbone's carried state."""
        self.backbone.reset_states()

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "backbone": keras.saving.serialize_keras_object(self.backbone)}

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone_object(config))


def _multi_worker_logs(logs):
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) \
            and strategy.extended._in_multi_worker_mode():
        return {name: tf.reshape(value, [1]) for name, value in logs.items()}
    return logs
