"""The exact projected-LSTM recurrence: one `tf.while_loop` over time for several independent
directions, with ELMo's clips (`docs/conventions.md` §4.2). Any stack of
`ProjectedLSTM`s runs through it (`ProjectedLSTM`, `BiLMStack`), under `tf.function` and XLA,
gradients included.
"""

import tensorflow as tf

from elmo_tf.keras_compat import gradients_may_be_taken, in_xla_compilation


def zero_state(batch, projection_dim, units):
    """Float32 zeros `(h [batch, P], c [batch, C])`."""
    return tf.zeros([batch, projection_dim]), tf.zeros([batch, units])


# At most this many rows (steps x batch) of gate inputs are computed by one matmul and kept, by
# device type. On a CPU, 384 rows (24 MiB per direction for the released model, however long
# the batch): as fast as one matmul over the whole batch, with less peak memory in inference
# (the written-out gradient recomputes every step's gates at once). On a GPU, no
# bound (None): one matmul for all steps and no branch in the loop (XLA runs a branch by reading
# its predicate back to the host), much faster; the cost is the gates of every step at once, 4C
# floats per token and direction. Figures: docs/benchmarks.md, "The LSTM's gate chunks".
# Under XLA, on any device, no bound either: XLA differentiated the chunks' branch inside the
# loop wrongly when TensorFlow derived the loop's gradient (`exact_recurrence`).
GATE_ROWS_PER_CHUNK = {"CPU": 384, "GPU": None}


def exact_recurrence(inputs, input_kernels, biases, recurrent_kernels, projection_kernels,
                     lengths, initial_h, initial_c, cell_clip, proj_clip,
                     gate_rows=None, for_gradient=None):
    """The exact projected-LSTM recurrence for several independent directions in one loop.

    The input matmul `x_t @ W_x + B` is hoisted out of the per-step work: it runs once per chunk
    of about `gate_rows // batch` steps (at least one), for all of them at once.

    Its gradient is written out (`_backward`), not derived by TensorFlow from the loop: one
    reverse loop for every direction, which recomputes each step's gates from the h and c the
    forward loop kept and runs the step backwards (four matmuls per step and direction with a
    projection, two without), and the weights' gradients each one matmul over all steps after
    it. That is TensorFlow's arithmetic for the gradient of the loop (tested against it and
    against finite differences; the gates are recomputed in one matmul, where the forward loop
    may have computed them in chunks), with about 0.6x the graph to trace and optimise and no
    per-step sum of the weights' gradients.

    Args:
        inputs: per direction, `[time, batch, in]` in the matmul dtype, in reading order.
        input_kernels, biases, recurrent_kernels, projection_kernels: per direction, `[in, 4C]`,
            `[4C]`, `[P, 4C]`, `[C, P]` in the matmul dtype (gate order i, j, f, o); a
            projection kernel of None is a cell without projection (`h = o * tanh(c)`, P = C).
        lengths: int32 `[batch]`; steps at or past a row's length keep its state, output 0.
        initial_h, initial_c: per direction, float32 `[batch, P]`, `[batch, C]`.
        cell_clip, proj_clip: Python floats or None.
        gate_rows: the most rows (steps x batch) of gate inputs one matmul computes; None: all
            steps at once, with no branch in the loop. Ignored (None) when XLA compiles the
            loop: its gradient of the branch that computes a chunk's gates inside the loop was
            wrong (the input kernels' and the inputs', off by as much as their size, where
            the plain graph's matched finite differences), and a branch is a read of its
            predicate back to the host on a GPU. (Compiled on a CPU, the gates of every step
            are then kept at once: 4C floats per token and direction.)
        for_gradient: whether to run with the written-out gradient, keeping each step's c
            (4 bytes x C per token and direction) for it; None: where a `tf.GradientTape`
            records. Without it the loop keeps nothing, and TensorFlow derives the gradient of
            the loop if one is asked for (slower to build, the same values).

    Returns:
        (outputs, final_h, final_c): per direction, `[time, batch, P]` in the matmul dtype,
        float32 `[batch, P]` and `[batch, C]`.
    """
    if in_xla_compilation():
        gate_rows = None
    directions = len(inputs)
    cell = _Cell(cell_clip, proj_clip, inputs[0].dtype)
    if for_gradient is None:
        for_gradient = gradients_may_be_taken()
    if not for_gradient:
        loop = _forward(cell, inputs, input_kernels, biases, recurrent_kernels,
                        projection_kernels, lengths, initial_h, initial_c, gate_rows)
        return loop["outputs"], loop["final_h"], loop["final_c"]
    projected = [k is not None for k in projection_kernels]

    @tf.custom_gradient
    def differentiable(*flat):
        xs, wxs, bs, wrs = (list(flat[i * directions:(i + 1) * directions]) for i in range(4))
        rest = list(flat[4 * directions:])
        wps = [rest.pop(0) if p else None for p in projected]
        h0s, c0s = rest[:directions], rest[directions:2 * directions]
        length = rest[-1]
        loop = _forward(cell, xs, wxs, bs, wrs, wps, length, h0s, c0s, gate_rows,
                        keep_cells=True)

        def gradient(*upstream):
            d_out, d_h, d_c = (upstream[i * directions:(i + 1) * directions] for i in range(3))
            grads = _backward(cell, loop, xs, wxs, bs, wrs, wps, length, h0s, c0s, d_out, d_h,
                              d_c)
            per = lambda key: [g[key] for g in grads]
            return (per("x") + per("input_kernel") + per("bias") + per("recurrent_kernel")
                    + [g["projection_kernel"] for g, p in zip(grads, projected) if p]
                    + per("h0") + per("c0") + [None])

        return loop["outputs"] + loop["final_h"] + loop["final_c"], gradient

    result = differentiable(*inputs, *input_kernels, *biases, *recurrent_kernels,
                            *[k for k in projection_kernels if k is not None],
                            *initial_h, *initial_c, lengths)
    return (list(result[:directions]), list(result[directions:2 * directions]),
            list(result[2 * directions:]))


class _Cell:
    """One step of the projected LSTM cell, shared by the loop and its gradient."""

    def __init__(self, cell_clip, proj_clip, dtype):
        self.cell_clip, self.proj_clip, self.dtype = cell_clip, proj_clip, dtype

    def matmul(self, a, b, transpose_b=False):
        """float32 `a` times `b` in the matmul dtype, back in float32."""
        return tf.cast(tf.matmul(tf.cast(a, self.dtype), b, transpose_b=transpose_b),
                       tf.float32)

    def gates(self, g, h, recurrent_kernel):
        """(sigmoid(i), tanh(j), sigmoid(f + 1), sigmoid(o)) of gate inputs `g` and state `h`."""
        z = tf.cast(g, tf.float32) + self.matmul(h, recurrent_kernel)
        i, j, f, o = tf.split(z, 4, axis=1)
        return tf.sigmoid(i), tf.tanh(j), tf.sigmoid(f + 1.0), tf.sigmoid(o)

    def clipped(self, value, clip):
        return value if clip is None else tf.clip_by_value(value, -clip, clip)

    @staticmethod
    def within(value, clip):
        """Where the gradient of `clip_by_value(value, -clip, clip)` passes (bounds included)."""
        return tf.logical_and(value >= -clip, value <= clip)


def _forward(cell, inputs, input_kernels, biases, recurrent_kernels, projection_kernels,
             lengths, initial_h, initial_c, gate_rows, keep_cells=False):
    """The loop. Returns a dict: `outputs`, `final_h`, `final_c` (as `exact_recurrence`), and
    what the gradient reads: `raw` (per direction, `[steps, batch, P]`, every step's h in the
    matmul dtype, before the outputs are masked), `cells` (per direction, float32
    `[steps, batch, C]`, the c each step starts from; with `keep_cells`), `valid`, `last`
    (each row's last valid step), `steps`, `time`."""
    dtype = cell.dtype
    time, batch = tf.shape(inputs[0])[0], tf.shape(inputs[0])[1]
    # With no time steps, one masked no-op step still runs, so that the outputs can be stacked
    # without a branch (XLA needs static shapes, and a branch's output shape is not).
    steps = tf.maximum(time, 1)
    valid = tf.transpose(tf.sequence_mask(lengths, steps))[:, :, None]  # [steps, batch, 1]
    # Equal chunks (every chunk of gates has the same shape, as XLA needs), balanced so that
    # padding the time axis to whole chunks adds fewer steps than there are chunks.
    if gate_rows is None:  # no branch in the loop
        n_chunks, steps_per_chunk = 1, steps
    else:
        n_chunks = -(-steps // tf.clip_by_value(gate_rows // tf.maximum(batch, 1), 1, steps))
        steps_per_chunk = -(-steps // n_chunks)
    inputs = [tf.pad(x, [[0, n_chunks * steps_per_chunk - time], [0, 0], [0, 0]]) for x in inputs]

    def chunk_gates(d, t, steps):
        x_all = inputs[d]
        _, batch, in_dim = tf.unstack(tf.shape(x_all))
        return _gate_inputs(tf.slice(x_all, [t, 0, 0], [steps, batch, in_dim]), input_kernels[d],
                            biases[d])

    def step(t, gates, hs, cs, arrays, kept):
        is_valid = valid[t]
        offset = t % steps_per_chunk
        new_gates, new_hs, new_cs, new_arrays, new_kept = [], [], [], [], []
        for d, (g, h, c, array) in enumerate(zip(gates, hs, cs, arrays)):
            if gate_rows is not None:
                g = tf.cond(tf.logical_and(tf.equal(offset, 0), t > 0),
                            lambda d=d, g=g: chunk_gates(d, t, tf.shape(g)[0]), lambda g=g: g)
            i, j, f, o = cell.gates(g[offset], h, recurrent_kernels[d])
            c_t = cell.clipped(f * c + i * j, cell.cell_clip)
            h_t = o * tf.tanh(c_t)
            if projection_kernels[d] is not None:
                h_t = cell.matmul(h_t, projection_kernels[d])
            h_t = cell.clipped(h_t, cell.proj_clip)
            # Past a row's length only c is frozen: that row's h and outputs are never used
            # (outputs are zeroed and final h is read from the last valid output, after the loop).
            new_gates.append(g)
            new_hs.append(h_t)
            new_cs.append(tf.where(is_valid, c_t, c))
            new_arrays.append(array.write(t, tf.cast(h_t, dtype)))
            if keep_cells:
                new_kept.append(kept[d].write(t, c))
        return t + 1, new_gates, new_hs, new_cs, new_arrays, new_kept

    n = len(inputs)
    gates = [chunk_gates(d, 0, steps_per_chunk) for d in range(n)]
    arrays = [tf.TensorArray(dtype, size=steps, element_shape=h.shape) for h in initial_h]
    kept = ([tf.TensorArray(tf.float32, size=steps, element_shape=c.shape) for c in initial_c]
            if keep_cells else [])
    loop_vars = (tf.constant(0), gates, list(initial_h), list(initial_c), arrays, kept)
    any_shape = lambda rank: tf.TensorShape([None] * rank)
    invariants = (tf.TensorShape([]), [any_shape(3)] * n, [any_shape(2)] * n,
                  [any_shape(2)] * n, [tf.TensorShape(None)] * n,
                  [tf.TensorShape(None)] * len(kept))
    _, _, _, final_c, arrays, kept = tf.while_loop(
        lambda t, *_: t < steps, step, loop_vars, shape_invariants=invariants,
        parallel_iterations=1, maximum_iterations=steps)  # a bound XLA's gradient needs
    raw = [array.stack() for array in arrays]  # [steps, batch, P]
    last = tf.maximum(lengths - 1, 0)
    final_h = [tf.where(lengths[:, None] > 0,
                        tf.cast(tf.gather(tf.transpose(o, [1, 0, 2]), last, batch_dims=1),
                                tf.float32), h0)
               for o, h0 in zip(raw, initial_h)]
    outputs = [tf.where(valid, o, tf.zeros((), dtype))[:time] for o in raw]
    return {"outputs": outputs, "final_h": final_h, "final_c": list(final_c), "raw": raw,
            "cells": [array.stack() for array in kept], "valid": valid, "last": last,
            "steps": steps, "time": time}


def _gate_inputs(x, kernel, bias):
    """`x @ kernel + bias` for time-major `x` `[steps, batch, in]`: `[steps, batch, 4C]`."""
    # Shapes come from tf.shape of captured or loop tensors: inside a loop, XLA treats values
    # computed outside it as run-time parameters, and it needs shapes at compile time.
    steps, batch, in_dim = tf.unstack(tf.shape(x))
    gates = tf.nn.bias_add(tf.matmul(tf.reshape(x, [steps * batch, in_dim]), kernel),
                           bias)  # fuses into one oneDNN kernel
    return tf.reshape(gates, [steps, batch, tf.shape(kernel)[1]])


def _backward(cell, loop, inputs, input_kernels, biases, recurrent_kernels, projection_kernels,
              lengths, initial_h, initial_c, d_outputs, d_final_h, d_final_c):
    """The gradients of every direction's outputs, final h and final c (`d_*`, per direction,
    None where nothing flows) with respect to its inputs, weights and initial state:
    `_forward`'s arithmetic run backwards in one loop for all directions, each step's gates
    recomputed from the h and c the forward loop kept. Returns one dict per direction, keyed
    by argument name."""
    dtype = cell.dtype
    valid, steps, time = loop["valid"], loop["steps"], loop["time"]
    batch = tf.shape(initial_h[0])[0]
    n = len(inputs)
    xs = [tf.pad(x, [[0, steps - time], [0, 0], [0, 0]]) for x in inputs]
    has_steps = lengths[:, None] > 0
    at_last = tf.logical_and(
        tf.equal(tf.range(steps)[:, None], loop["last"][None, :])[:, :, None], has_steps[None])
    d_raw, d_h0, gates, h_before = [], [], [], []
    for d in range(n):
        # What reaches each step's h from outside the loop: its output where valid, and final
        # h at a row's last step.
        width = tf.shape(initial_h[d])[1]
        d_raw.append(tf.zeros([steps, batch, width], dtype))
        if d_outputs[d] is not None:
            d_raw[d] += tf.where(valid, tf.pad(d_outputs[d], [[0, steps - time], [0, 0], [0, 0]]),
                                 tf.zeros((), dtype))
        d_h0.append(tf.zeros_like(initial_h[d]))
        if d_final_h[d] is not None:
            d_raw[d] += tf.where(at_last, tf.cast(d_final_h[d], dtype)[None], tf.zeros((), dtype))
            d_h0[d] = tf.where(has_steps, tf.zeros((), tf.float32), d_final_h[d])
        # Each step's gate inputs, and the h before it (the c before it the forward loop kept).
        gates.append(_gate_inputs(xs[d], input_kernels[d], biases[d]))
        h_before.append(tf.concat([tf.cast(initial_h[d], dtype)[None], loop["raw"][d][:-1]], 0))

    def step(k, dhs, dcs, d_gates, d_projected, projected_from):
        t = steps - 1 - k  # the step whose gradient this iteration computes
        is_valid = valid[t]
        new = [], [], [], [], []
        for d in range(n):
            dh, dc, projection = dhs[d], dcs[d], projection_kernels[d]
            c_prev = loop["cells"][d][t]
            i, j, f, o = cell.gates(gates[d][t], h_before[d][t], recurrent_kernels[d])
            c_raw = f * c_prev + i * j
            tanh_c = tf.tanh(cell.clipped(c_raw, cell.cell_clip))
            h_raw = o * tanh_c
            dh = dh + tf.cast(d_raw[d][t], tf.float32)
            if cell.proj_clip is not None:
                h_out = h_raw if projection is None else cell.matmul(h_raw, projection)
                dh = tf.where(cell.within(h_out, cell.proj_clip), dh, 0.0)
            projected = d_projected[d], projected_from[d]
            if projection is not None:
                projected = (projected[0].write(t, tf.cast(dh, dtype)),
                             projected[1].write(t, tf.cast(h_raw, dtype)))
                dh = cell.matmul(dh, projection, transpose_b=True)
            d_c = tf.where(is_valid, dc, 0.0) + dh * o * (1.0 - tanh_c * tanh_c)
            if cell.cell_clip is not None:
                d_c = tf.where(cell.within(c_raw, cell.cell_clip), d_c, 0.0)
            d_z = tf.cast(tf.concat([d_c * j * i * (1.0 - i), d_c * i * (1.0 - j * j),
                                     d_c * c_prev * f * (1.0 - f), dh * tanh_c * o * (1.0 - o)],
                                    axis=1), dtype)
            for values, value in zip(new, (
                    cell.matmul(d_z, recurrent_kernels[d], transpose_b=True),
                    d_c * f + tf.where(is_valid, 0.0, dc), d_gates[d].write(t, d_z), *projected)):
                values.append(value)
        return (k + 1, *new)

    sizes = [steps if k is not None else 0 for k in projection_kernels]
    loop_vars = (tf.constant(0), [tf.zeros_like(h) for h in initial_h],
                 [tf.zeros_like(c) if g is None else g for c, g in zip(initial_c, d_final_c)],
                 [tf.TensorArray(dtype, size=steps) for _ in range(n)],
                 [tf.TensorArray(dtype, size=size) for size in sizes],
                 [tf.TensorArray(dtype, size=size) for size in sizes])
    _, dhs, dcs, d_gates, d_projected, projected_from = tf.while_loop(
        lambda k, *_: k < steps, step, loop_vars, parallel_iterations=1,
        maximum_iterations=steps)
    flat = lambda tensor: tf.reshape(tensor, [steps * batch, -1])
    grads = []
    for d in range(n):
        d_gate = flat(d_gates[d].stack())
        grads.append({
            "x": tf.reshape(tf.matmul(d_gate, input_kernels[d], transpose_b=True),
                            [steps, batch, -1])[:time],
            "input_kernel": tf.matmul(flat(xs[d]), d_gate, transpose_a=True),
            "bias": tf.reduce_sum(d_gate, axis=0),
            "recurrent_kernel": tf.matmul(flat(h_before[d]), d_gate, transpose_a=True),
            "projection_kernel": None if projection_kernels[d] is None else tf.matmul(
                flat(projected_from[d].stack()), flat(d_projected[d].stack()), transpose_a=True),
            "h0": dhs[d] + d_h0[d],
            "c0": dcs[d],
        })
    return grads


def reverse_valid_steps(time_major, lengths):
    """Reverses each row's first `lengths` steps of a time-major `[time, batch, ...]` tensor
    (padding stays at the end): a backward direction's reading order, and back."""
    return tf.reverse_sequence(time_major, lengths, seq_axis=0, batch_axis=1)


def left_to_right_rows(rows):
    """The layout of bidirectional truncated backpropagation through time: of a stream batch's
    `rows` (a replica's), those that read their stream left to right, the first
    `ceil(rows / 2)`; the others read theirs right to left. `BiLSTMStack` carries each row's
    state in its reading direction; Masked ELMo's stream batches are laid out so."""
    return (rows + 1) // 2
