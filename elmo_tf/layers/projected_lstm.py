"""`ProjectedLSTM`: ELMo's LSTM with projection and clipping, and the exact kernel that runs it.

The cell is TF1's `LSTMCell(C, num_proj=P, cell_clip, proj_clip)` with `forget_bias=1.0`
(`docs/conventions.md` §4.2):

    z   = x_t @ W_x + h_{t-1} @ W_h + B            # gates i, j, f, o
    c_t = clip(sigmoid(f + 1) * c_{t-1} + sigmoid(i) * tanh(j), +-cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) @ W_P, +-proj_clip)

or, for a cell without projection (`projection=False`, Masked ELMo's option; P = C),
`h_t = sigmoid(o) * tanh(c_t)`.

One kernel runs it on every device: one `tf.while_loop` over time advances every direction it
is given (the biLM passes both) with no per-step Python; the input matmul is hoisted out of the
per-step work (one matmul per chunk of steps). Matmuls (and the bias of the hoisted one) run in
the layer's compute dtype (bfloat16 under `mixed_bfloat16`); their results are summed, and the
cell state, non-linearities and clips computed, in float32. It runs under XLA, gradients
included. (elmo-tf 0.1 also had a cuDNN path, `implementation="cudnn"`; TensorFlow 2.21
cannot run an LSTM with a projection on cuDNN, see `docs/design.md`, so it is gone.)
"""

import functools
import types

import keras
import numpy as np
import tensorflow as tf

from elmo_tf.keras_compat import gradients_may_be_taken
from elmo_tf.layers.initializers import initializer
from elmo_tf.ops.chunking import compute_device_type
from elmo_tf.ops.lstm import (
    GATE_ROWS_PER_CHUNK,
    exact_recurrence,
    reverse_valid_steps,
    zero_state,
)
from elmo_tf.ops.padding import sequence_lengths

DIRECTIONS = ("forward", "backward")


@keras.saving.register_keras_serializable(package="elmo_tf")
class ProjectedLSTM(keras.layers.Layer):
    """One direction of ELMo's projected, clipped LSTM over padded sequences.

    Weights keep the released layout, split at the hdf5's `W_0` row boundary: `input_kernel`
    `[input_dim, 4C]` and `recurrent_kernel` `[P, 4C]` are `W_0`'s rows, `bias` is `B` (the +1
    forget bias is added at run time, as TF1 did), `projection_kernel` is `W_P_0` `[C, P]`
    (None without projection).

    Args:
        units: memory cell size C (`lstm.dim`).
        projection_dim: projected output and recurrent state size P (`lstm.projection_dim`).
        cell_clip: clip of the memory cell to +-value, or None.
        proj_clip: clip of the projected output to +-value, or None.
        projection: False for a cell without projection: its output and recurrent state are
            `o * tanh(c)` itself, so `projection_dim` must equal `units`.
        direction: `"forward"` reads each sequence left to right; `"backward"` reads its valid
            part right to left (`tf.reverse_sequence`), and outputs stay aligned with the inputs.
        return_state: also return the final `(h [batch, P], c [batch, C])`, taken at each
            sequence's last valid step.
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`initializers.initializer`; not part of the config).

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
                 projection=True, direction="forward", return_state=False, initialize=True,
                 **kwargs):
        super().__init__(**removed_implementation(kwargs))
        self.initialize_weights = bool(initialize)
        # An eager call runs the recurrence through this layer's own graph, cached here (in a
        # plain namespace: not tracked, not saved); a graph (fit, embed, XLA) builds the loop
        # inline, in its own context. (One graph shared by every caller reused traces across
        # contexts: a trace made by an XLA inference step, or by `fit` without XLA, failed to
        # compile in an XLA training step, "OptionalFromValue" in the gradient of the loop's
        # branch.) A partial, not the function itself: TensorFlow counts a function's traces
        # by its code, so every layer's first traces together (several models called eagerly)
        # warned of "excessive retracing"; a partial is counted on its own.
        recurrence = functools.partial(exact_recurrence)
        recurrence.__name__ = exact_recurrence.__name__  # (no `__wrapped__`: the count's key)
        self._eager = types.SimpleNamespace(recurrence=tf.function(
            recurrence, autograph=False, reduce_retracing=True))
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}.")
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.projection = bool(projection)
        if not self.projection and (self.projection_dim != self.units or proj_clip is not None):
            raise ValueError(f"a cell without projection outputs its {units} units: it needs "
                             f"projection_dim == units and no proj_clip; got projection_dim="
                             f"{projection_dim}, proj_clip={proj_clip}.")
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
            initializer=initializer(keras.initializers.RandomUniform(-limit, limit),
                                    self.initialize_weights))
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.projection_dim, 4 * self.units),
            initializer=initializer(keras.initializers.RandomUniform(-limit, limit),
                                    self.initialize_weights))
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection_kernel = None if not self.projection else self.add_weight(
            name="projection_kernel", shape=(self.units, self.projection_dim),
            initializer=initializer("glorot_uniform", self.initialize_weights))

    def call(self, inputs, mask=None, initial_state=None):
        inputs = tf.convert_to_tensor(inputs)
        batch, time = tf.shape(inputs)[0], tf.shape(inputs)[1]
        lengths = tf.fill([batch], time) if mask is None else sequence_lengths(mask)
        if initial_state is None:
            initial_state = zero_state(batch, self.projection_dim, self.units)
        inputs_tm = tf.transpose(inputs, [1, 0, 2])
        if self.direction == "backward":
            inputs_tm = reverse_valid_steps(inputs_tm, lengths)
        (outputs,), ((h, c),) = run_projected_lstms([self], [inputs_tm], lengths, [initial_state])
        if self.direction == "backward":
            outputs = reverse_valid_steps(outputs, lengths)
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
                      projection=self.projection, direction=self.direction,
                      return_state=self.return_state)
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


def run_projected_lstms(layers, inputs_tm, lengths, initial_states):
    """Runs independent `ProjectedLSTM` directions over time-major inputs, in one loop.

    Args:
        layers: built `ProjectedLSTM`s sharing clips and compute dtype (with or without
            projection).
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
    # eagerly, it runs through the first layer's cached graph instead of step by step in Python.
    recurrence = first._eager.recurrence if tf.executing_eagerly() else exact_recurrence
    outputs, final_h, final_c = recurrence(
        [tf.cast(x, dtype) for x in inputs_tm],
        [tf.cast(layer.input_kernel, dtype) for layer in layers],
        [tf.cast(layer.bias, dtype) for layer in layers],
        [tf.cast(layer.recurrent_kernel, dtype) for layer in layers],
        [None if layer.projection_kernel is None else tf.cast(layer.projection_kernel, dtype)
         for layer in layers],
        lengths, [s[0] for s in initial_states], [s[1] for s in initial_states],
        first.cell_clip, first.proj_clip, GATE_ROWS_PER_CHUNK[compute_device_type()],
        # The written-out gradient where a tape records and a layer trains; a frozen stack's
        # gradient is stopped above it, and its loop keeps nothing for one. (A Python bool:
        # part of the eager path's cache key, which the tape is not.)
        gradients_may_be_taken() and any(layer.trainable for layer in layers))
    # The eager path's tf.function generalises shapes across models; restore the static widths.
    outputs = [tf.ensure_shape(o, [None, None, layer.projection_dim])
               for o, layer in zip(outputs, layers)]
    return outputs, list(zip(final_h, final_c))
