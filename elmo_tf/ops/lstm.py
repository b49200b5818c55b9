"""The exact projected-LSTM recurrence: one `tf.while_loop` over time for several independent
directions, with ELMo's clips (`docs/conventions.md` §4.2). Any stack of
`ProjectedLSTM`s runs through it (`ProjectedLSTM`, `BiLMStack`), under `tf.function` and XLA,
gradients included.
"""

import tensorflow as tf

from elmo_tf.keras_compat import in_xla_compilation


def zero_state(batch, projection_dim, units):
    """Float32 zeros `(h [batch, P], c [batch, C])`."""
    return tf.zeros([batch, projection_dim]), tf.zeros([batch, units])


# At most this many rows (steps x batch) of gate inputs are computed by one matmul and kept, by
# device type. On a CPU, 384 rows (24 MiB per direction for the released model, however long
# the batch): as fast as one matmul over the whole batch, with less peak memory. On a GPU, no
# bound (None): one matmul for all steps and no branch in the loop (XLA runs a branch by reading
# its predicate back to the host), much faster; the cost is the gates of every step at once, 4C
# floats per token and direction. Figures: docs/benchmarks.md, "The LSTM's gate chunks".
# Under XLA, on any device, no bound either: XLA differentiates the chunks' branch inside the
# loop wrongly (the input kernels' and inputs' gradients; `exact_recurrence`).
GATE_ROWS_PER_CHUNK = {"CPU": 384, "GPU": None}


def exact_recurrence(inputs, input_kernels, biases, recurrent_kernels, projection_kernels,
                     lengths, initial_h, initial_c, cell_clip, proj_clip,
                     gate_rows=None):
    """The exact projected-LSTM recurrence for several independent directions in one loop.

    The input matmul `x_t @ W_x + B` is hoisted out of the per-step work: it runs once per chunk
    of about `gate_rows // batch` steps (at least one), for all of them at once.

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
            loop: its gradient of the branch that computes a chunk's gates inside the loop is
            wrong (the input kernels' and the inputs', off by as much as their size, where
            the plain graph's matches finite differences; tested), and the gradient without
            the branch is right. (Compiled on a CPU, the gates of every step are then kept at
            once: 4C floats per token and direction.)

    Returns:
        (outputs, final_h, final_c): per direction, `[time, batch, P]` in the matmul dtype,
        float32 `[batch, P]` and `[batch, C]`.
    """
    dtype = inputs[0].dtype
    if in_xla_compilation():
        gate_rows = None
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
        # Shapes come from tf.shape of captured or loop tensors: inside a loop, XLA treats values
        # computed outside it as run-time parameters, and it needs shapes at compile time.
        x_all, kernel = inputs[d], input_kernels[d]
        _, batch, in_dim = tf.unstack(tf.shape(x_all))
        x = tf.reshape(tf.slice(x_all, [t, 0, 0], [steps, batch, in_dim]), [steps * batch, in_dim])
        gates = tf.nn.bias_add(tf.matmul(x, kernel), biases[d])  # fuses into one oneDNN kernel
        return tf.reshape(gates, [steps, batch, tf.shape(kernel)[1]])

    def step(t, gates, hs, cs, arrays):
        is_valid = valid[t]
        offset = t % steps_per_chunk
        new_gates, new_hs, new_cs, new_arrays = [], [], [], []
        for d, (g, h, c, array) in enumerate(zip(gates, hs, cs, arrays)):
            if gate_rows is not None:
                g = tf.cond(tf.logical_and(tf.equal(offset, 0), t > 0),
                            lambda d=d, g=g: chunk_gates(d, t, tf.shape(g)[0]), lambda g=g: g)
            z = tf.cast(g[offset], tf.float32) + tf.cast(
                tf.matmul(tf.cast(h, dtype), recurrent_kernels[d]), tf.float32)
            i, j, f, o = tf.split(z, 4, axis=1)
            c_t = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
            if cell_clip is not None:
                c_t = tf.clip_by_value(c_t, -cell_clip, cell_clip)
            h_t = tf.sigmoid(o) * tf.tanh(c_t)
            if projection_kernels[d] is not None:
                h_t = tf.cast(tf.matmul(tf.cast(h_t, dtype), projection_kernels[d]), tf.float32)
            if proj_clip is not None:
                h_t = tf.clip_by_value(h_t, -proj_clip, proj_clip)
            # Past a row's length only c is frozen: that row's h and outputs are never used
            # (outputs are zeroed and final h is read from the last valid output, after the loop).
            new_gates.append(g)
            new_hs.append(h_t)
            new_cs.append(tf.where(is_valid, c_t, c))
            new_arrays.append(array.write(t, tf.cast(h_t, dtype)))
        return t + 1, new_gates, new_hs, new_cs, new_arrays

    gates = [chunk_gates(d, 0, steps_per_chunk) for d in range(len(inputs))]
    arrays = [tf.TensorArray(dtype, size=steps, element_shape=h.shape) for h in initial_h]
    loop_vars = (tf.constant(0), gates, list(initial_h), list(initial_c), arrays)
    any_shape = lambda rank: tf.TensorShape([None] * rank)
    invariants = (tf.TensorShape([]), [any_shape(3)] * len(inputs), [any_shape(2)] * len(inputs),
                  [any_shape(2)] * len(inputs), [tf.TensorShape(None)] * len(inputs))
    _, _, _, final_c, arrays = tf.while_loop(
        lambda t, *_: t < steps, step, loop_vars, shape_invariants=invariants,
        parallel_iterations=1, maximum_iterations=steps)  # a bound XLA's gradient needs
    outputs = [array.stack() for array in arrays]  # [steps, batch, P]
    last = tf.maximum(lengths - 1, 0)
    final_h = [tf.where(lengths[:, None] > 0,
                        tf.cast(tf.gather(tf.transpose(o, [1, 0, 2]), last, batch_dims=1),
                                tf.float32), h0)
               for o, h0 in zip(outputs, initial_h)]
    outputs = [tf.where(valid, o, tf.zeros((), dtype))[:time] for o in outputs]
    return outputs, final_h, final_c


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
