import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers import BiLMStack
from tests import reference
from tests.conftest import assert_serializable

P, C = 4, 6


def _stack(n_layers=3, skip=True, **kwargs):
    stack = BiLMStack(n_layers, C, P, cell_clip=1.0, proj_clip=0.7, use_skip_connections=skip,
                      **kwargs)
    stack.build((None, None, P))
    rng = np.random.default_rng(0)
    for lstm in stack.forward_layers + stack.backward_layers:
        for v in lstm.weights:
            v.assign(rng.standard_normal(v.shape).astype(np.float32))
    return stack


def _reference(stack, x, length, skip):
    """Each direction's layers through the spec's cell, residual from the second layer on."""
    outputs = []
    for layers, reverse in ((stack.forward_layers, False), (stack.backward_layers, True)):
        inputs, per_layer = x[:length].astype(np.float64), []
        for k, lstm in enumerate(layers):
            w0 = np.concatenate([lstm.input_kernel.numpy(), lstm.recurrent_kernel.numpy()])
            h, c, out = np.zeros(P), np.zeros(C), np.zeros((length, P))
            for t in (range(length - 1, -1, -1) if reverse else range(length)):
                h, c = reference.lstm_step(inputs[t], h, c, w0, lstm.bias.numpy(),
                                           lstm.projection_kernel.numpy(), 1.0, 0.7)
                out[t] = h
            if k > 0 and skip:
                out = out + inputs
            per_layer.append(out)
            inputs = out
        outputs.append(per_layer)
    layers = [np.concatenate([x[:length], x[:length]], -1)]
    return np.stack(layers + [np.concatenate([f, b], -1) for f, b in zip(*outputs)])


@pytest.mark.parametrize("skip", [True, False])
def test_matches_reference_layer_by_layer(skip):
    stack = _stack(skip=skip)
    x = np.random.default_rng(1).standard_normal((3, 5, P)).astype(np.float32)
    lengths = [5, 3, 1]
    out = stack(x, mask=tf.sequence_mask(lengths, 5)).numpy()
    assert out.shape == (3, 4, 5, 2 * P)
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(out[row, :, :length], _reference(stack, x[row], length, skip),
                                   atol=1e-5)
        assert not out[row, :, length:].any()


def test_residual_adds_the_dropped_out_input():
    """bilm-tf's DropoutWrapper drops the layer's input, and the residual adds that dropped
    input. With the second layer's weights at zero its LSTM output is exactly 0, so its output
    is the residual alone: 0 or 1/(1 - rate) times the first layer's output."""
    stack = _stack(n_layers=2, dropout=0.5)
    for lstm in (stack.forward_layers[1], stack.backward_layers[1]):
        for v in lstm.weights:
            v.assign(tf.zeros_like(v))
    x = np.random.default_rng(5).standard_normal((3, 6, P)).astype(np.float32)
    out = stack(x, training=True).numpy()
    first, second = out[:, 1], out[:, 2]
    dropped = (second == 0) & (first != 0)
    assert 0.3 < dropped.mean() < 0.7
    np.testing.assert_allclose(second[~dropped], 2.0 * first[~dropped], rtol=1e-6)


def test_directions_are_independent():
    # Changing the backward weights leaves every forward half untouched.
    stack = _stack()
    x = np.random.default_rng(2).standard_normal((2, 4, P)).astype(np.float32)
    before = stack(x).numpy()
    for lstm in stack.backward_layers:
        lstm.bias.assign(lstm.bias + 1.0)
    after = stack(x).numpy()
    np.testing.assert_array_equal(after[:, 1:, :, :P], before[:, 1:, :, :P])
    assert np.abs(after[:, 1:, :, P:] - before[:, 1:, :, P:]).max() > 1e-3


def test_stateful_carries_each_rows_state_and_resets():
    stateless = _stack()
    stateful = _stack(stateful=True, max_batch_size=4)
    x = np.random.default_rng(3).standard_normal((2, 4, P)).astype(np.float32)
    first = stateful(x).numpy()
    np.testing.assert_allclose(first, stateless(x), atol=1e-6)
    second = stateful(x[:1]).numpy()  # a smaller batch reads and writes the first rows
    assert np.abs(second - first[:1]).max() > 1e-3
    stateful.reset_states()
    np.testing.assert_allclose(stateful(x), first, atol=1e-6)
    assert {v.name for v in stateful.non_trainable_weights} == {"state_h", "state_c"}


def test_saved_weights_leave_out_the_kept_state(tmp_path):
    # A stack trained with 2 rows of state per replica reloads into 4 rows, from zero state.
    import keras

    def model(max_batch_size):
        inputs = keras.Input((None, P))
        stack = _stack(stateful=True, max_batch_size=max_batch_size)
        return keras.Model(inputs, stack(inputs)), stack

    x = np.random.default_rng(7).standard_normal((2, 4, P)).astype(np.float32)
    trained, _ = model(2)
    first = trained(x).numpy()
    trained(x)  # state is now non-zero
    trained.save_weights(tmp_path / "stack.weights.h5")
    reloaded, stack = model(4)
    reloaded(x)  # its own state is non-zero too
    for lstm in stack.forward_layers + stack.backward_layers:
        for v in lstm.weights:
            v.assign(tf.zeros_like(v))
    reloaded.load_weights(tmp_path / "stack.weights.h5")
    assert not np.asarray(stack.state_h).any() and not np.asarray(stack.state_c).any()
    np.testing.assert_allclose(reloaded(x), first, atol=1e-6)


def test_stateful_under_mixed_bfloat16_keeps_float32_state():
    stack = BiLMStack(1, C, P, stateful=True, max_batch_size=2, dtype="mixed_bfloat16")
    x = np.random.default_rng(6).standard_normal((2, 3, P)).astype(np.float32)
    first, second = stack(x).numpy(), stack(x).numpy()
    assert stack.state_h.dtype == "float32" and np.abs(first - second).max() > 1e-3


def test_gradients_reach_both_directions_and_the_inputs():
    stack = _stack()
    x = tf.constant(np.random.default_rng(4).standard_normal((2, 4, P)), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(stack(x)[:, -1] ** 2)
    grads = tape.gradient(loss, [x] + stack.trainable_weights)
    assert all(g is not None and np.abs(tf.convert_to_tensor(g)).sum() > 0 for g in grads)


def test_config_round_trip():
    x = np.random.default_rng(5).standard_normal((2, 4, P)).astype(np.float32)
    restored = assert_serializable(BiLMStack(2, C, P, cell_clip=3.0, proj_clip=3.0,
                                             use_skip_connections=False,
                                             dtype="mixed_bfloat16"), x)
    assert not restored.use_skip_connections
    assert restored.forward_layers[0].compute_dtype == "bfloat16"
    restored = assert_serializable(BiLMStack(2, C, P, stateful=True, max_batch_size=7))
    assert restored.stateful and restored.max_batch_size == 7
