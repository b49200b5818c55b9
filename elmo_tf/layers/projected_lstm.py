"""`ProjectedLSTM`: ELMo's LSTM with projection and clipping, and the exact kernel that runs it.

The cell is TF1's `LSTMCell(C, num_proj=P, cell_clip, proj_clip)` with `forget_bias=1.0`
(`../shared/spec/elmo-reference.md` §4.2):

    z   = x_t @ W_x + h_{t-1} @ W_h + B            # gates i, j, f, o
    c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), +-cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) @ W_P, +-proj_clip)

One kernel runs it on every device: one `tf.while_loop` over time advances every direction it
is given (the biLM passes both) with no per-step Python; the input matmul is hoisted out of the
per-step work (one matmul per chunk of steps). Matmuls (and the bias of the hoisted one) run in
the layer's compute dtype (bfloat16 under `mixed_bfloat16`); their results are summed, and the
cell state, non-linearities and clips computed, in float32. It runs under XLA, gradients
included. (elmo-tf 0.1 also had a cuDNN path, `implementation="cudnn"`; TensorFlow 2.21
cannot run an LSTM with a projection on cuDNN, see `docs/design.md`, so it is gone.)
"""

import keras
import numpy as np
import tensorflow as tf

from elmo_tf.layers.initializers import initializer
from elmo_tf.layers.masking import sequence_lengths

DIRECTIONS = ("forward", "backward")


@keras.saving.register_keras_serializable(package="elmo_tf")
class ProjectedLSTM(keras.layers.Layer):
    """One direction of ELMo's projected, clipped LSTM over padded sequences.

    Weights keep the released layout, split at the hdf5's `W_0` row boundary: `input_kernel`
    `[input_dim, 4C]` and `recurrent_kernel` `[P, 4C]` are `W_0`'s rows, `bias` is `B` (the +1
    forget bias is added at run time, as TF1 did), `projection_kernel` is `W_P_0` `[C, P]`.

    Args:
        units: memory cell size C (`lstm.dim`).
        projection_dim: projected output and recurrent state size P (`lstm.projection_dim`).
        cell_clip: clip of the memory cell to +-value, or None.
        proj_clip: clip of the projected output to +-value, or None.
        direction: `"forward"` reads each sequence left to right; `"backward"` reads its valid
            part right to left (`tf.reverse_sequence`), and outputs stay aligned with the inputs.
        return_state: also return the final `(h [batch, P], c [batch, C])`, taken at each
            sequence's last valid step.

    Call arguments:
        inputs: `[batch, time, input_dim]`.
        mask: bool `[batch, time]`, right-padded; positions past a sequence's length leave its
            state unchanged and output zeros. None means all valid.
        initial_state: optional `(h, c)`; zeros by default.

    Example:
    >>> lstm = ProjectedLSTM(units=8, projection_dim=4, cell_clip=3.0, proj_clip=3.0)
    >>> x = tf.random.normal([2, 5, 4])
    >>> mask = tf.sequence_mask([5, 3], 5)
    >>> lstm(x, mask=mask).shape
    TensorShape([2, 5, 4])
    """

    def __init__(self, units, projection_dim, cell_clip=None, proj_clip=None,
                 direction="forward", return_state=False, **kwargs):
        super().__init__(**removed_implementation(kwargs))
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}.")
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.direction = direction
        self.return_state = return_state
        self.supports_masking = True

    def build(self, input_shape):
        input_dim = input_shape[-1]
        # TF1's default for `LSTMCell`'s kernel: Glorot-uniform over the joint [x, h] matrix.
        limit = np.sqrt(6.0 / (input_dim + self.projection_dim + 4 * self.units))
        self.input_kernel = self.add_weight(
            name="input_kernel", shape=(input_dim, 4 * self.units),
            initializer=initializer(keras.initializers.RandomUniform(-limit, limit)))
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.projection_dim, 4 * self.units),
            initializer=initializer(keras.initializers.RandomUniform(-limit, limit)))
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(self.units, self.projection_dim),
            initializer=initializer("glorot_uniform"))

    def call(self, inputs, mask=None, initial_state=None):
        inputs = tf.convert_to_tensor(inputs)
        batch, time = tf.shape(inputs)[0], tf.shape(inputs)[1]
        lengths = tf.fill([batch], time) if mask is None else sequence_lengths(mask)
        if initial_state is None:
            initial_state = zero_state(batch, self.projection_dim, self.units)
        inputs_tm = tf.transpose(inputs, [1, 0, 2])
        if self.direction == "backward":
            inputs_tm = tf.reverse_sequence(inputs_tm, lengths, seq_axis=0, batch_axis=1)
        (outputs,), ((h, c),) = run_projected_lstms([self], [inputs_tm], lengths, [initial_state])
        if self.direction == "backward":
            outputs = tf.reverse_sequence(outputs, lengths, seq_axis=0, batch_axis=1)
        outputs = tf.transpose(outputs, [1, 0, 2])
        return (outputs, h, c) if self.return_state else outputs

    def compute_mask(self, inputs, mask=None):
        return [mask, None, None] if self.return_state else mask

    def compute_output_shape(self, input_shape):
        outputs = tuple(input_shape[:-1]) + (self.projection_dim,)
        if not self.return_state:
            return outputs
        batch = input_shape[0]
        return outputs, (batch, self.projection_dim), (batch, self.units)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      cell_clip=self.cell_clip, proj_clip=self.proj_clip,
                      direction=self.direction, return_state=self.return_state)
        return config


def removed_implementation(kwargs):
    """`kwargs` without elmo-tf 0.1's `implementation` (configs saved by it name `"exact"`, the
    only kernel now); `"cudnn"` is refused with the reason."""
    kwargs = dict(kwargs)
    implementation = kwargs.pop("implementation", "exact")
    if implementation != "exact":
        raise ValueError(
            f"implementation={implementation!r} is gone: TensorFlow 2.21 cannot run an LSTM with "
            "a projection on cuDNN (CudnnRNNCanonicalToParams aborts the process and CudnnRNNV3 "
            "rejects num_proj < num_units; see docs/design.md). The exact kernel runs on every "
            "device, under XLA too; leave `implementation` out.")
    return kwargs


def zero_state(batch, projection_dim, units):
    """Float32 zeros `(h [batch, P], c [batch, C])`."""
    return tf.zeros([batch, projection_dim]), tf.zeros([batch, units])


def run_projected_lstms(layers, inputs_tm, lengths, initial_states):
    """Runs independent `ProjectedLSTM` directions over time-major inputs, in one loop.

    Args:
        layers: built `ProjectedLSTM`s sharing clips and compute dtype.
        inputs_tm: one `[time, batch, in]` per layer, already in the order the layer reads
            (reversed by the caller for a backward direction).
        lengths: int32 `[batch]` valid steps per row.
        initial_states: one float32 `(h, c)` per layer.

    Returns:
        (outputs, final_states): outputs `[time, batch, P]` in the layers' compute dtype (zeros
        past each length) and float32 `(h, c)` per layer.
    """
    first = layers[0]
    dtype = first.compute_dtype
    # In a graph (fit, embed, XLA) the loop is built inline, in the caller's context; called
    # eagerly, it runs through one cached graph instead of step by step in Python.
    recurrence = _eager_exact_recurrence if tf.executing_eagerly() else exact_recurrence
    outputs, final_h, final_c = recurrence(
        [tf.cast(x, dtype) for x in inputs_tm],
        [tf.cast(layer.input_kernel, dtype) for layer in layers],
        [tf.cast(layer.bias, dtype) for layer in layers],
        [tf.cast(layer.recurrent_kernel, dtype) for layer in layers],
        [tf.cast(layer.projection_kernel, dtype) for layer in layers],
        lengths, [s[0] for s in initial_states], [s[1] for s in initial_states],
        first.cell_clip, first.proj_clip, GATE_ROWS_PER_CHUNK)
    # The eager path's tf.function generalises shapes across models; restore the static widths.
    outputs = [tf.ensure_shape(o, [None, None, layer.projection_dim])
               for o, layer in zip(outputs, layers)]
    return outputs, list(zip(final_h, final_c))


# At most this many rows (steps x batch) of gate inputs are computed by one matmul and kept
# (24 MiB per direction for the released model, however long the batch): as fast as one matmul
# over a whole 32 x 20 batch (measured), with about 70 MiB less peak memory.
GATE_ROWS_PER_CHUNK = 384


def exact_recurrence(inputs, input_kernels, biases, recurrent_kernels, projection_kernels,
                     lengths, initial_h, initial_c, cell_clip, proj_clip,
                     gate_rows=GATE_ROWS_PER_CHUNK):
    """The exact projected-LSTM recurrence for several independent directions in one loop.

    The input matmul `x_t @ W_x + B` is hoisted out of the per-step work: it runs once per chunk
    of about `gate_rows // batch` steps (at least one), for all of them at once.

    Args:
        inputs: per direction, `[time, batch, in]` in the matmul dtype, in reading order.
        input_kernels, biases, recurrent_kernels, projection_kernels: per direction, `[in, 4C]`,
            `[4C]`, `[P, 4C]`, `[C, P]` in the matmul dtype (gate order i, j, f, o).
        lengths: int32 `[batch]`; steps at or past a row's length keep its state, output 0.
        initial_h, initial_c: per direction, float32 `[batch, P]`, `[batch, C]`.
        cell_clip, proj_clip: Python floats or None.
        gate_rows: the most rows (steps x batch) of gate inputs one matmul computes.

    Returns:
        (outputs, final_h, final_c): per direction, `[time, batch, P]` in the matmul dtype,
        float32 `[batch, P]` and `[batch, C]`.
    """
    dtype = inputs[0].dtype
    time, batch = tf.shape(inputs[0])[0], tf.shape(inputs[0])[1]
    # With no time steps, one masked no-op step still runs, so that the outputs can be stacked
    # without a branch (XLA needs static shapes, and a branch's output shape is not).
    steps = tf.maximum(time, 1)
    valid = tf.transpose(tf.sequence_mask(lengths, steps))[:, :, None]  # [steps, batch, 1]
    # Equal chunks (every chunk of gates has the same shape, as XLA needs), balanced so that
    # padding the time axis to whole chunks adds fewer steps than there are chunks.
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
            g = tf.cond(tf.logical_and(tf.equal(offset, 0), t > 0),
                        lambda d=d, g=g: chunk_gates(d, t, tf.shape(g)[0]), lambda g=g: g)
            z = tf.cast(g[offset], tf.float32) + tf.cast(
                tf.matmul(tf.cast(h, dtype), recurrent_kernels[d]), tf.float32)
            i, j, f, o = tf.split(z, 4, axis=1)
            c_t = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
            if cell_clip is not None:
                c_t = tf.clip_by_value(c_t, -cell_clip, cell_clip)
            m = tf.sigmoid(o) * tf.tanh(c_t)
            h_t = tf.cast(tf.matmul(tf.cast(m, dtype), projection_kernels[d]), tf.float32)
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


# Not for graphs: TF builds the gradient of the loop's branch differently under XLA, and a
# trace shared across contexts (one made by `fit` or an XLA inference step, reused by an XLA
# training step) fails to compile ("OptionalFromValue").
_eager_exact_recurrence = tf.function(exact_recurrence, autograph=False, reduce_retracing=True)
