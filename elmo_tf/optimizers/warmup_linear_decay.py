"""`WarmupLinearDecay`: a linear warm-up, then a constant rate or a linear decay to zero."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="elmo_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """A linear warm-up and a linear decay to zero (as BERT's, in HuggingFace's form:
    `get_linear_schedule_with_warmup`, the warm-up counting the step being taken), each half
    optional.

    Step `t` (the optimizer's `iterations` before the update, from 0) is taken at
    `learning_rate * (t + 1) / warmup_steps` while `t < warmup_steps` (no step at zero), then at
    `learning_rate * (decay_steps - t) / (decay_steps - warmup_steps)`, falling linearly to
    zero at step `decay_steps` (its last step, `decay_steps - 1`, still moves), or at
    `learning_rate` where `decay_steps` is None. Steps past `decay_steps` take zero (a recipe's
    run is refused longer than its `decay_steps`: `elmo_tf.training.train`). The step is the
    optimizer's `iterations`: steps that a float16 loss scale skips do not count.

    Args:
        learning_rate: the peak rate.
        warmup_steps: steps of the linear warm-up (0: none).
        decay_steps: the step at which the rate reaches zero (None: no decay); more than
            `warmup_steps`.

    Example:
    >>> schedule = WarmupLinearDecay(2e-3, warmup_steps=100, decay_steps=2000)
    >>> optimizer = elmo_tf.optimizers.Adam(schedule, global_clipnorm=10.0)
    """

    def __init__(self, learning_rate, warmup_steps=0, decay_steps=None):
        problems = schedule_problems(warmup_steps, decay_steps)
        if problems:
            raise ValueError("; ".join(problems) + ".")
        self.learning_rate = learning_rate
        self.warmup_steps = warmup_steps
        self.decay_steps = decay_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        rate = ops.convert_to_tensor(self.learning_rate, "float32")
        if self.decay_steps is not None:
            rate = rate * ops.clip((self.decay_steps - step)
                                   / (self.decay_steps - self.warmup_steps), 0.0, 1.0)
        if self.warmup_steps:
            rate = rate * ops.minimum((step + 1) / self.warmup_steps, 1.0)
        return rate

    def get_config(self):
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps,
                "decay_steps": self.decay_steps}


def schedule_problems(warmup_steps, decay_steps):
    """A problem string for a schedule's step counts that are wrong (none: `[]`), in the one
    wording `WarmupLinearDecay` and a `Recipe` give.

    Example:
    >>> schedule_problems(10, 10)
    ['decay_steps must be None or an integer above warmup_steps (10); got 10']
    """
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        return [f"warmup_steps must be an integer >= 0; got {warmup_steps!r}"]
    if decay_steps is not None and (isinstance(decay_steps, bool)
                                    or not isinstance(decay_steps, int)
                                    or decay_steps <= warmup_steps):
        return [f"decay_steps must be None or an integer above warmup_steps ({warmup_steps}); "
                f"got {decay_steps!r}"]
    return []
