import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers import ProjectedLSTM
from elmo_tf.ops import lstm
from elmo_tf.ops.lstm import exact_recurrence
from tests import reference
from tests.conftest import assert_serializable

C, P, IN = 12, 5, 7


def _layer(direction="forward", cell_clip=0.8, proj_clip=0.5, seed=0, **kwargs):
    """A layer with large random weights, so both clips fire."""
    rng = np.random.default_rng(seed)
    layer = ProjectedLSTM(C, P, cell_clip=cell_clip, proj_clip=proj_clip, direction=direction,
                          **kwargs)
    layer.build((None, None, IN))
    for v in layer.weights:
        v.assign(rng.standard_normal(v.shape).astype(np.float32))
    return layer


def _elmo_weights(layer):
    w0 = np.concatenate([layer.input_kernel.numpy(), layer.recurrent_kernel.numpy()])
    return w0.astype(np.float64), layer.bias.numpy(), layer.projection_kernel.numpy()


def _reference_run(layer, x, length, h=None, c=None, reverse=False):
    """One sequence through the spec's cell; returns outputs [time, P] and the final state."""
    w0, b, wp = _elmo_weights(layer)
    h = np.zeros(P) if h is None else h
    c = np.zeros(C) if c is None else c
    order = range(length - 1, -1, -1) if reverse else range(length)
    out = np.zeros((len(x), P))
    for t in order:
        h, c = reference.lstm_step(x[t], h, c, w0, b, wp, layer.cell_clip, layer.proj_clip)
        out[t] = h
    return out, h, c


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_matches_spec_cell_with_lengths_clips_and_states(direction):
    layer = _layer(direction, return_state=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 6, IN)).astype(np.float32)
    lengths = [6, 2, 0]
    h0 = rng.standard_normal((3, P)).astype(np.float32)
    c0 = rng.standard_normal((3, C)).astype(np.float32)
    out, h, c = layer(x, mask=tf.sequence_mask(lengths, 6), initial_state=(h0, c0))
    for row, length in enumerate(lengths):
        exp_out, exp_h, exp_c = _reference_run(layer, x[row], length, h0[row], c0[row],
                                               reverse=direction == "backward")
        np.testing.assert_allclose(out[row], exp_out, atol=1e-5)
        np.testing.assert_allclose(h[row], exp_h, atol=1e-5)  # frozen at the last valid step
        np.testing.assert_allclose(c[row], exp_c, atol=1e-5)
    # Rows that ran hold clipped states; the empty row keeps its (unclipped) initial state.
    assert np.abs(c[:2]).max() <= 0.8 + 1e-6 and np.abs(out).max() <= 0.5 + 1e-6


def test_both_clips_are_exercised_by_the_test_weights():
    layer = _layer(cell_clip=None, proj_clip=None, return_state=True)
    x = np.random.default_rng(1).standard_normal((1, 6, IN)).astype(np.float32)
    out, _, c = layer(x)
    assert np.abs(out).max() > 0.5 and np.abs(c).max() > 0.8


def test_no_mask_means_every_step_and_zero_initial_state():
    layer = _layer()
    x = np.random.default_rng(3).standard_normal((2, 4, IN)).astype(np.float32)
    expected = np.stack([_reference_run(layer, x[r], 4)[0] for r in range(2)])
    np.testing.assert_allclose(layer(x), expected, atol=1e-5)


def test_forget_bias_is_added_at_run_time():
    # With zero weights every gate pre-activation is 0, so after one step
    # c = sigmoid(0 + 1) * c0 + sigmoid(0) * tanh(0) = sigmoid(1) * c0.
    layer = ProjectedLSTM(C, P, return_state=True)
    layer.build((None, None, IN))
    for v in layer.weights:
        v.assign(tf.zeros_like(v))
    c0 = np.ones((1, C), np.float32)
    _, _, c = layer(np.zeros((1, 1, IN), np.float32), initial_state=(np.zeros((1, P)), c0))
    np.testing.assert_allclose(c, 1 / (1 + np.exp(-1.0)) * c0, rtol=1e-6)


def test_gradients_flow_through_the_recurrence_to_every_weight_and_input():
    layer = _layer(cell_clip=None, proj_clip=None)
    x = tf.constant(np.random.default_rng(4).standard_normal((2, 5, IN)).astype(np.float32) * 0.1)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x, mask=tf.sequence_mask([5, 3], 5))[:, -1] ** 2)
    grads = tape.gradient(loss, [x] + layer.trainable_weights)
    assert all(g is not None and np.abs(tf.convert_to_tensor(g)).sum() > 0 for g in grads)
    # The first input step influences the last output only through the recurrence.
    assert np.abs(grads[0][0, 0]).sum() > 0
    assert not np.abs(grads[0][1, 3:]).sum()  # past row 1's length: no influence


def test_gradient_matches_finite_differences():
    layer = _layer(cell_clip=None, proj_clip=None, seed=5)
    for v in layer.weights:
        v.assign(v * 0.3)
    x = tf.constant(np.random.default_rng(6).standard_normal((1, 4, IN)), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x) * np.arange(P, dtype=np.float32))
    grad = tape.gradient(loss, x).numpy()
    eps = 1e-2
    for t, j in [(0, 0), (2, 3), (3, 6)]:
        delta = np.zeros((1, 4, IN), np.float32)
        delta[0, t, j] = eps
        numeric = (tf.reduce_sum(layer(x + delta) * np.arange(P)) -
                   tf.reduce_sum(layer(x - delta) * np.arange(P))) / (2 * eps)
        np.testing.assert_allclose(grad[0, t, j], numeric, rtol=2e-2, atol=1e-3)


def test_gradients_under_xla_match_eager():
    layer = _layer()
    x = tf.constant(np.random.default_rng(12).standard_normal((2, 5, IN)), tf.float32)
    mask = tf.sequence_mask([5, 3], 5)

    def grads(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, mask=mask) ** 2)
        return tape.gradient(loss, [x] + layer.trainable_weights)

    for a, b in zip(tf.function(grads, jit_compile=True)(x), grads(x)):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_right_padding_is_required():
    with pytest.raises(tf.errors.InvalidArgumentError, match="right-padded"):
        _layer()(np.zeros((1, 3, IN), np.float32), mask=tf.constant([[False, True, True]]))


def test_graph_and_xla_match_eager():
    layer = _layer()
    x = np.random.default_rng(7).standard_normal((2, 5, IN)).astype(np.float32)
    mask = tf.sequence_mask([5, 2], 5)
    eager = layer(x, mask=mask)
    np.testing.assert_allclose(tf.function(lambda a, m: layer(a, mask=m))(x, mask), eager,
                               atol=1e-5)
    np.testing.assert_allclose(
        tf.function(lambda a, m: layer(a, mask=m), jit_compile=True)(x, mask), eager, atol=1e-5)


def test_mixed_bfloat16_runs_matmuls_in_bf16_and_stays_close():
    fp32 = _layer(cell_clip=3.0, proj_clip=3.0)
    bf16 = ProjectedLSTM(C, P, cell_clip=3.0, proj_clip=3.0, dtype="mixed_bfloat16")
    bf16.build((None, None, IN))
    for a, b in zip(bf16.weights, fp32.weights):
        a.assign(b * 0.3)
        b.assign(b * 0.3)
    x = np.random.default_rng(8).standard_normal((2, 5, IN)).astype(np.float32)
    out = bf16(x)
    assert out.dtype == tf.bfloat16
    assert 0 < np.abs(tf.cast(out, tf.float32) - fp32(x)).max() < 0.1


def test_empty_batch_and_empty_time():
    layer = _layer(return_state=True)
    out, h, c = layer(np.zeros((0, 3, IN), np.float32))
    assert out.shape == (0, 3, P) and h.shape == (0, P) and c.shape == (0, C)
    out, h, _ = layer(np.zeros((2, 0, IN), np.float32))
    assert out.shape == (2, 0, P) and not np.abs(h).sum()


def test_config_round_trip_and_errors():
    x = np.random.default_rng(13).standard_normal((2, 3, IN)).astype(np.float32)
    restored = assert_serializable(ProjectedLSTM(C, P, cell_clip=3, proj_clip=2,
                                                 direction="backward", return_state=True), x)
    assert restored.cell_clip == 3.0 and restored.direction == "backward"
    with pytest.raises(ValueError, match="direction must be one of"):
        ProjectedLSTM(C, P, direction="left")


def test_configs_of_elmo_tf_0_1_load_and_the_cudnn_path_is_refused_with_the_reason():
    config = ProjectedLSTM(C, P, cell_clip=3).get_config()
    restored = ProjectedLSTM.from_config({**config, "implementation": "exact"})  # as 0.1 saved
    assert restored.get_config() == config
    with pytest.raises(ValueError, match="implementation='cudnn' is gone.*cannot run an LSTM "
                                         "with a projection on cuDNN"):
        ProjectedLSTM(C, P, implementation="cudnn")


@pytest.mark.parametrize("gate_rows", [None, 1, 4, 7])
def test_gate_inputs_in_chunks_give_the_same_result(gate_rows):
    # Small row budgets split the hoisted input matmul into several chunks, with padding (the
    # CPU's way without XLA); None computes every step's gates at once, with no branch in the
    # loop (the GPU's way, and any device's under XLA: the compiled calls below run so).
    layer = _layer()
    rng = np.random.default_rng(11)
    x = rng.standard_normal((7, 2, IN)).astype(np.float32)  # time-major: 7 steps, batch 2
    args = ([tf.constant(x)], [layer.input_kernel.value], [layer.bias.value],
            [layer.recurrent_kernel.value], [layer.projection_kernel.value],
            tf.constant([7, 4]), [tf.zeros([2, P])], [tf.zeros([2, C])], 0.8, 0.5)
    whole = exact_recurrence(*args)
    chunked = exact_recurrence(*args, gate_rows=gate_rows)
    # Under XLA the gates come all at once whatever `gate_rows` asks, so every parameter would
    # compile the same program on the same inputs: the compiled calls run for one of them (7,
    # uneven, so the override is what makes it whole).
    compiled = gate_rows == 7
    for a, b in zip(tf.nest.flatten(whole), tf.nest.flatten(chunked)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    if compiled:
        xla = tf.function(lambda: exact_recurrence(*args, gate_rows=gate_rows), jit_compile=True)()
        for a, c in zip(tf.nest.flatten(whole), tf.nest.flatten(xla)):
            np.testing.assert_allclose(a, c, atol=1e-5)
    for row, length in enumerate([7, 4]):
        np.testing.assert_allclose(chunked[0][0][:, row], _reference_run(layer, x[:, row], length)[0],
                                   atol=1e-5)

    def gradients(rows):
        with tf.GradientTape() as tape:
            tape.watch(args[0])
            outputs, final_h, final_c = exact_recurrence(*args, gate_rows=rows)
            loss = tf.reduce_sum(outputs[0] ** 2) + tf.reduce_sum(final_h[0] * final_c[0][:, :P])
        return tape.gradient(loss, args[0] + args[1] + args[3])

    reference = gradients(3)
    runs = [gradients(gate_rows)]
    if compiled:
        runs.append(tf.function(lambda: gradients(gate_rows), jit_compile=True)())
    for grads in runs:
        for a, b in zip(reference, grads):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_two_directions_in_chunks_differentiate_under_xla_as_without_it():
    """Two directions in one loop (a biLM layer's), the gates in chunks (the CPU's bound):
    XLA's gradient of the branch that computes a chunk inside the loop is wrong (the input
    kernels' off by as much as their size: `fit --xla on` on a CPU trained worse), so under
    XLA the gates come all at once; the gradients then equal the plain graph's (which match
    finite differences: `test_gradient_matches_finite_differences`), at every length."""
    rng = np.random.default_rng(13)
    layers = [_layer(seed=s) for s in (21, 22)]
    for layer in layers:
        for v in layer.weights:
            v.assign(v * 0.3)
    kernels = [layer.input_kernel.value for layer in layers]

    def gradients(x, lengths):
        with tf.GradientTape() as tape:
            tape.watch(kernels)
            outputs, _, _ = exact_recurrence(
                [x, tf.reverse(x, [0])], kernels, [layer.bias.value for layer in layers],
                [layer.recurrent_kernel.value for layer in layers],
                [layer.projection_kernel.value for layer in layers], lengths,
                [tf.zeros([6, P])] * 2, [tf.zeros([6, C])] * 2, 0.8, 0.5, gate_rows=12)
            loss = tf.reduce_sum(outputs[0] ** 2) + tf.reduce_sum(outputs[1] * 0.5)
        return tape.gradient(loss, kernels)

    for time in (4, 6, 8, 12):  # 2 steps of 6 rows per chunk
        x = tf.constant(rng.standard_normal((time, 6, IN)), tf.float32)
        lengths = tf.constant(rng.integers(time - 3, time + 1, 6), tf.int32)
        plain = tf.function(gradients)(x, lengths)
        compiled = tf.function(gradients, jit_compile=True)(x, lengths)
        for a, b in zip(compiled, plain):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"time {time}")


@pytest.mark.parametrize("dtype, time, gate_rows, jit", [
    ("float32", 7, 10, False), ("float32", 7, None, True), ("float32", 0, None, False),
    ("bfloat16", 7, 10, False)])
def test_the_written_out_gradient_is_tensorflows_gradient_of_the_loop(dtype, time, gate_rows,
                                                                      jit):
    """`exact_recurrence`'s gradient (`_backward`, a loop of its own) against TensorFlow's
    gradient of the forward loop itself (`_forward` differentiated by the tape): two
    directions in one loop, with and without projection, both clips firing, rows of every
    length (0 included), initial states, and gradients flowing in through the outputs, final
    h and final c; in float32 and in bfloat16 matmuls, with the gates in chunks (of 2 steps),
    compiled."""
    rng = np.random.default_rng(31)
    dtype = tf.as_dtype(dtype)
    batch, directions, projected = 5, 2, (True, False)
    cast = lambda a: tf.constant(a.astype(np.float32) * 0.6, dtype)
    widths = [P if p else C for p in projected]
    xs = [cast(rng.standard_normal((time, batch, IN))) for _ in range(directions)]
    kernels = [cast(rng.standard_normal((IN, 4 * C))) for _ in range(directions)]
    biases = [cast(rng.standard_normal(4 * C)) for _ in range(directions)]
    recurrent = [cast(rng.standard_normal((w, 4 * C))) for w in widths]
    projection = [cast(rng.standard_normal((C, P))) if p else None for p in projected]
    lengths = tf.constant(np.minimum([time, 0, 3, time, 1], time), tf.int32)
    h0 = [tf.constant(rng.standard_normal((batch, w)), tf.float32) for w in widths]
    c0 = [tf.constant(rng.standard_normal((batch, C)), tf.float32) for _ in range(directions)]
    sources = xs + kernels + biases + recurrent + [k for k in projection if k is not None] + h0 + c0
    weights = [tf.constant(rng.standard_normal((time, batch, w)), tf.float32) for w in widths]

    def gradients(run):
        with tf.GradientTape() as tape:
            tape.watch(sources)
            outputs, final_h, final_c = run()
            loss = sum(tf.reduce_sum(tf.cast(o, tf.float32) * w) for o, w in zip(outputs, weights))
            loss += sum(tf.reduce_sum(h * 0.7) + tf.reduce_sum(c ** 2)
                        for h, c in zip(final_h, final_c))
        return tape.gradient(loss, sources)

    cell = lstm._Cell(0.8, 0.5, dtype)
    args = (xs, kernels, biases, recurrent, projection, lengths, h0, c0)
    tensorflows = tf.function(lambda: gradients(lambda: (lambda loop: (
        loop["outputs"], loop["final_h"], loop["final_c"]))(lstm._forward(cell, *args, gate_rows))))
    written_out = tf.function(lambda: gradients(lambda: exact_recurrence(
        *args, 0.8, 0.5, gate_rows=gate_rows)), jit_compile=jit)
    assert _uses_the_written_out_gradient(written_out.get_concrete_function().graph)
    assert not _uses_the_written_out_gradient(tensorflows.get_concrete_function().graph)
    tolerance = 1e-5 if dtype == tf.float32 else 2e-2
    for expected, got in zip(tensorflows(), written_out()):
        scale = max(1.0, float(tf.reduce_max(tf.abs(tf.cast(expected, tf.float32)))))
        np.testing.assert_allclose(tf.cast(got, tf.float32), tf.cast(expected, tf.float32),
                                   atol=tolerance * scale, rtol=tolerance)


def _uses_the_written_out_gradient(graph):
    """Whether `graph` runs the loop under `tf.custom_gradient` (its IdentityN), keeping each
    step's c for `_backward`."""
    return "IdentityN" in _op_types(graph)


def test_the_loop_keeps_nothing_for_a_gradient_where_none_is_taken():
    """Inference (no tape), or a frozen layer under a tape, runs the loop alone: nothing kept
    for the written-out gradient; a trainable layer under a tape runs with it. A frozen
    layer's gradient, where one is still asked for, is TensorFlow's own (the same values)."""
    layer = _layer()
    x = tf.constant(np.random.default_rng(5).standard_normal((2, 3, IN)), tf.float32)

    def run(tape=None):
        if tape is None:
            return layer(x)
        with tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) ** 2)
        return tape.gradient(loss, x)

    graph = lambda *args: tf.function(run).get_concrete_function(*args).graph
    assert not _uses_the_written_out_gradient(graph())
    assert _uses_the_written_out_gradient(graph(tf.GradientTape()))
    written_out = run(tf.GradientTape())
    layer.trainable = False
    assert not _uses_the_written_out_gradient(graph(tf.GradientTape()))
    np.testing.assert_allclose(run(tf.GradientTape()), written_out, rtol=1e-5, atol=1e-6)


def _op_types(graph):
    types = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():
        types |= {node.op for node in function.definition.node_def}
    return types


@pytest.mark.parametrize("gate_rows, jit, branch",
                         [(None, False, False), (16, False, True), (16, True, False)])
def test_the_loop_branches_only_when_the_gates_come_in_chunks(gate_rows, jit, branch):
    # A branch in the loop costs a host round trip per step under XLA on a GPU, where the
    # gates of all steps are computed at once (gate_rows None): the graph has none then. Nor
    # has it any when XLA compiles the loop, whatever gate_rows says (its gradient of the
    # branch is wrong: the test below).
    layer = _layer()

    @tf.function(jit_compile=jit)
    def run(x, lengths, h, c):
        return exact_recurrence([x], [layer.input_kernel.value], [layer.bias.value],
                                [layer.recurrent_kernel.value], [layer.projection_kernel.value],
                                lengths, [h], [c], 0.8, 0.5, gate_rows=gate_rows)

    graph = run.get_concrete_function(
        tf.TensorSpec([None, None, IN]), tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None, P]), tf.TensorSpec([None, C])).graph
    assert bool({"If", "StatelessIf"} & _op_types(graph)) == branch


def test_gradient_compiles_with_xla_after_a_trace_without_it():
    # The recurrence is one tf.function shared by every layer: a trace made outside XLA (as
    # `fit` makes it) must not be reused inside a jit_compile function, whose gradient of the
    # loop's branches TF builds differently. (Clips no other test uses: a trace of their own.)
    layer = _layer(cell_clip=0.77, proj_clip=0.44)
    x = tf.constant(np.random.default_rng(12).standard_normal((2, 5, IN)), tf.float32)

    def grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x)[0] ** 2)
        return tape.gradient(loss, layer.trainable_weights)

    plain = tf.function(grads)()
    for a, b in zip(tf.function(grads, jit_compile=True)(), plain):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_cell_without_projection_is_the_spec_cell_with_an_identity_projection(direction):
    rng = np.random.default_rng(4)
    layer = ProjectedLSTM(C, C, cell_clip=0.8, projection=False, direction=direction,
                          return_state=True)
    layer.build((None, None, IN))
    assert layer.projection_kernel is None and len(layer.weights) == 3
    for v in layer.weights:
        v.assign(rng.standard_normal(v.shape).astype(np.float32))
    x = rng.standard_normal((2, 5, IN)).astype(np.float32)
    lengths = [5, 3]
    out, h, c = layer(x, mask=tf.sequence_mask(lengths, 5))
    w0 = np.concatenate([layer.input_kernel.numpy(), layer.recurrent_kernel.numpy()])
    for row, length in enumerate(lengths):
        state_h, state_c, expected = np.zeros(C), np.zeros(C), np.zeros((5, C))
        steps = range(length - 1, -1, -1) if direction == "backward" else range(length)
        for t in steps:
            state_h, state_c = reference.lstm_step(x[row, t], state_h, state_c, w0,
                                                   layer.bias.numpy(), np.eye(C), 0.8, None)
            expected[t] = state_h
        np.testing.assert_allclose(out[row], expected, atol=1e-5)
        np.testing.assert_allclose(h[row], state_h, atol=1e-5)
        np.testing.assert_allclose(c[row], state_c, atol=1e-5)
    restored = assert_serializable(layer, x)
    assert restored.projection is False
    with pytest.raises(ValueError, match="needs projection_dim == units"):
        ProjectedLSTM(C, P, projection=False)


def test_many_layers_called_eagerly_trace_without_a_retracing_warning(monkeypatch):
    """Each layer's eager graph is its own: several models called eagerly (a notebook comparing
    them) do not add up to TensorFlow's "excessive retracing" warning, which counts a
    function's traces by its code."""
    import logging

    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    # A fresh count (TensorFlow warns at most twice per key and process: the earlier tests'
    # eager calls could have used those up).
    monkeypatch.setattr(polymorphic_function, "_frequent_tracing_detector_manager",
                        polymorphic_function._FrequentTracingDetectorManager())
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    try:
        for _ in range(6):  # TensorFlow warns from the fifth trace of one function on
            ProjectedLSTM(4, 2)(tf.ones([2, 3, 5]))
    finally:
        tf.get_logger().removeHandler(handler)
    assert not [m for m in said if "retracing" in m], said
