import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.optimizers import Adam, SparseAdagrad, WarmupLinearDecay


def _reference(rate, warmup, decay, step):
    """The schedule from its definition (HuggingFace's / BERT's linear warm-up and decay, the
    warm-up counting the step being taken), in plain Python."""
    if step < warmup:
        return rate * (step + 1) / warmup
    if decay is None:
        return rate
    return rate * max(0.0, (decay - step) / (decay - warmup))


@pytest.mark.parametrize("warmup, decay", [(0, None), (4, None), (0, 10), (4, 10), (1, 2)])
def test_the_rate_at_every_step_is_the_definitions(warmup, decay):
    schedule = WarmupLinearDecay(3e-3, warmup, decay)
    compiled = tf.function(schedule, jit_compile=True)
    for step in range(14):
        expected = _reference(3e-3, warmup, decay, step)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12), step
        assert float(compiled(tf.constant(step))) == pytest.approx(expected, rel=1e-6,
                                                                    abs=1e-12)
    if decay is not None:
        assert float(schedule(decay - 1)) > 0 and float(schedule(decay)) == 0


def test_config_round_trip_inside_an_optimizer():
    schedule = WarmupLinearDecay(2e-3, warmup_steps=5, decay_steps=50)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert type(again) is WarmupLinearDecay and again.get_config() == schedule.get_config()
    optimizer = Adam.from_config(Adam(schedule, global_clipnorm=1.0).get_config())
    assert isinstance(optimizer._learning_rate, WarmupLinearDecay)
    assert optimizer._learning_rate.get_config() == schedule.get_config()


@pytest.mark.parametrize("optimizer_class", [Adam, SparseAdagrad])
def test_the_optimizers_take_each_step_at_the_scheduled_rate(optimizer_class):
    """Plain SGD's view of the step: with one weight and a gradient of 1, Adam's update is the
    rate itself and Adagrad's (accumulator 0, epsilon off) the rate / sqrt(steps so far)."""
    variable = keras.Variable(np.zeros(1, np.float32))
    schedule = WarmupLinearDecay(0.1, warmup_steps=3, decay_steps=6)
    if optimizer_class is Adam:
        optimizer = Adam(schedule, epsilon=0.0)
    else:
        optimizer = SparseAdagrad(schedule, initial_accumulator_value=0.0, epsilon=0.0)
    before = 0.0
    for step in range(6):
        optimizer.apply_gradients([(tf.ones(1), variable)])
        moved = before - float(variable.numpy()[0])
        expected = _reference(0.1, 3, 6, step) / (1 if optimizer_class is Adam
                                                  else np.sqrt(step + 1))
        assert moved == pytest.approx(expected, rel=1e-4), step
        before = float(variable.numpy()[0])


@pytest.mark.parametrize("kwargs, message", [
    ({"warmup_steps": -1}, "warmup_steps must be an integer >= 0"),
    ({"warmup_steps": 5, "decay_steps": 5}, r"decay_steps must be None or an integer above "
                                            r"warmup_steps \(5\)"),
])
def test_bad_steps_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupLinearDecay(1e-3, **kwargs)
