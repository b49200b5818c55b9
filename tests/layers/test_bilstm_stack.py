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


def test_stream_windows_carry_each_rows_reading_direction():
    """Bidirectional TBPTT: of a 2-row stream batch, row 0 reads its text left to right and
    carries the forward state, row 1 reads its text right to left and carries the backward
    state. At layer 1 (which reads the tokens only) the carried direction then equals one pass
    over the whole text, and the other direction restarts from zero state."""
    rng = np.random.default_rng(1)
    text = tf.constant(rng.standard_normal((2, 10, P)), tf.float32)  # each row's text
    left, right = text[:, :5], text[:, 5:]
    stack = BiLSTMStack(2, C, P, stateful=True, max_batch_size=2)
    whole = stack(text).numpy()[:, 1]  # zero state, one pass
    alone = stack(tf.concat([right[:1], left[1:]], 0)).numpy()[:, 1]
    # Row 0 reads `left` then `right`; row 1 reads `right` then `left`.
    stack(tf.concat([left[:1], right[1:]], 0), carry_state=True)
    second = stack(tf.concat([right[:1], left[1:]], 0), carry_state=True).numpy()[:, 1]
    np.testing.assert_allclose(second[0, :, :P], whole[0, 5:, :P], atol=1e-6)  # carried
    np.testing.assert_allclose(second[1, :, P:], whole[1, :5, P:], atol=1e-6)  # carried
    np.testing.assert_allclose(second[0, :, P:], alone[0, :, P:], atol=1e-6)   # from zero
    np.testing.assert_allclose(second[1, :, :P], alone[1, :, :P], atol=1e-6)   # from zero
    assert np.abs(second[0, :, :P] - alone[0, :, :P]).max() > 1e-3  # the state mattered
    # A call without carry_state neither reads nor changes the kept state; reset zeroes it.
    kept = stack.state_h.numpy()
    np.testing.assert_array_equal(stack(text).numpy()[:, 1], whole)
    np.testing.assert_array_equal(stack.state_h.numpy(), kept)
    stack.reset_states()
    assert not stack.state_h.numpy().any() and not stack.state_c.numpy().any()
    assert_serializable(stack)
