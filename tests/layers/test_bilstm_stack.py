"""`BiLSTMStack`: layer k + 1 of both directions reads [forward_k; backward_k] of layer k."""

import numpy as np
import tensorflow as tf

from elmo_tf.layers.bilstm_stack import BiLSTMStack
from elmo_tf.layers.projected_lstm import ProjectedLSTM
from tests.conftest import assert_serializable

C, P = 6, 3


def _inputs():
    x = tf.constant(np.random.default_rng(0).standard_normal((2, 7, P)), tf.float32)
    return x, tf.sequence_mask([7, 4], 7)


def test_layers_are_projected_lstms_fed_the_previous_layers_both_directions():
    x, mask = _inputs()
    stack = BiLSTMStack(3, C, P)
    out = stack(x, mask=mask).numpy()
    # The same computation from single-direction ProjectedLSTMs with the stack's weights.
    inputs, expected = x, [np.concatenate([x, x], -1) * mask.numpy()[..., None]]
    for k in range(3):
        outputs = []
        for d, direction in enumerate(("forward", "backward")):
            lstm = ProjectedLSTM(C, P, direction=direction)
            lstm.build(inputs.shape)
            lstm.set_weights(stack.stacks[d][k].get_weights())
            outputs.append(lstm(inputs, mask=mask))
        layer = tf.concat(outputs, -1) + (inputs if k > 0 else 0)
        expected.append(layer.numpy())
        inputs = layer
    np.testing.assert_allclose(out, np.stack(expected, 1), atol=1e-6)
    assert not out[1, :, 4:].any()  # zeros at padding


def test_from_the_second_layer_every_position_sees_both_sides():
    x, _ = _inputs()
    stack = BiLSTMStack(2, C, P)
    t = 3
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        out = stack(x)
        first_forward = tf.reduce_sum(out[0, 1, t, :P])
        second_forward = tf.reduce_sum(out[0, 2, t, :P])
    before_after = lambda g: (np.abs(g[0, :t]).sum(), np.abs(g[0, t + 1:]).sum())
    left, right = before_after(tape.gradient(first_forward, x).numpy())
    assert left > 0 and right == 0  # layer 1's forward half: the left context only (as ELMo)
    left, right = before_after(tape.gradient(second_forward, x).numpy())
    assert left > 0 and right > 0  # layer 2's forward half: both sides


def test_serializable_and_xla():
    x, mask = _inputs()
    stack = BiLSTMStack(2, C, P, dropout=0.1)
    assert_serializable(stack, x)
    xla = tf.function(lambda: stack(x, mask=mask), jit_compile=True)()
    np.testing.assert_allclose(xla, stack(x, mask=mask), atol=1e-5)
