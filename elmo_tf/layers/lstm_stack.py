"""`LSTMStack`: what ELMo's `BiLMStack` and Masked ELMo's `BiLSTMStack` share."""

import keras
import tensorflow as tf

from elmo_tf.layers.projected_lstm import ProjectedLSTM
from elmo_tf.ops.lstm import zero_state


class LSTMStack(keras.layers.Layer):
    """Base of the stacks of forward and backward projected LSTM layers (`BiLMStack`,
    `BiLSTMStack`): their common arguments, their cells (`stacks[direction][layer]`, a
    `ProjectedLSTM` each), the state a stateful stack carries from call to call, and the
    output's shape and mask.

    Kept state: with `stateful=True` the final `(h, c)` of every layer and direction is kept per
    batch row, in `max_batch_size` rows (float32 under any dtype policy, like the kernel's
    state), and a carrying call starts from it: rows `0..batch-1` are read and overwritten, rows
    never seen start at zero, and `reset_states()` zeroes everything. Under a `tf.distribute`
    strategy the kept state is per replica (an on-read variable): each replica carries the rows
    of its own part of the batch. It is transient (bilm-tf restarts from zero state too) and
    left out of saved weights, so weights reload into any `max_batch_size` and any number of
    replicas, and a reloaded stack starts from zero.

    Args (both stacks take them so; after `projection_dim`, by keyword only):
        n_layers: LSTM layers per direction.
        units: memory cell size C.
        projection_dim: P, each direction's output size.
        use_skip_connections: residual connections from the second layer on.
        cell_clip, proj_clip: ELMo's clips, or None.
        stateful: keep state between calls.
        max_batch_size: rows of kept state when stateful.
        dropout: dropout rate on every LSTM layer's input in training.
        initialize: False leaves the cells' weights uninitialised, for weights about to be
            loaded (`initializers.initializer`; not part of the config).
    """

    def __init__(self, n_layers, units, projection_dim, *, use_skip_connections=True,
                 cell_clip=None, proj_clip=None, stateful=False, max_batch_size=128,
                 dropout=0.0, projection=True, initialize=True, **kwargs):
        super().__init__(**kwargs)
        self.n_layers = int(n_layers)
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.use_skip_connections = bool(use_skip_connections)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.stateful = bool(stateful)
        self.max_batch_size = int(max_batch_size)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        self.dropout = float(dropout)
        self.supports_masking = True
        self.stacks = [
            [ProjectedLSTM(units, projection_dim, cell_clip=cell_clip, proj_clip=proj_clip,
                           projection=projection, direction=direction, initialize=initialize,
                           dtype=self.dtype_policy, name=f"{direction}_lstm_{k}")
             for k in range(self.n_layers)]
            for direction in ("forward", "backward")]

    def build_state(self):
        """Creates the kept state (stateful stacks; call it from `build`)."""
        if not self.stateful:
            return
        rows = (2, self.n_layers, self.max_batch_size)
        # float32 under any policy, like the kernel's state (autocast would make it bf16);
        # on-read: one copy per replica under a distribution strategy.
        self.state_h, self.state_c = (
            keras.Variable(keras.initializers.Zeros()(rows + (size,)), trainable=False,
                           dtype="float32", autocast=False, synchronization="on_read",
                           aggregation="mean", name=name)
            for name, size in (("state_h", self.projection_dim), ("state_c", self.units)))

    def initial_states(self, batch, carry):
        """`states[direction][layer] = (h, c)`, float32: the kept state's first `batch` rows
        when `carry` (a stateful stack), else zeros."""
        if not carry:
            zeros = zero_state(batch, self.projection_dim, self.units)
            return [[zeros] * self.n_layers for _ in range(2)]
        message = (f"a stateful stack keeps state for max_batch_size={self.max_batch_size} "
                   "rows; the batch is larger")
        static_batch = tf.get_static_value(batch)
        if static_batch is not None and static_batch > self.max_batch_size:
            raise ValueError(f"{message} ({static_batch}).")
        tf.debugging.assert_less_equal(batch, self.max_batch_size, message=message)
        h = tf.convert_to_tensor(self.state_h)[:, :, :batch]
        c = tf.convert_to_tensor(self.state_c)[:, :, :batch]
        return [[(h[d, k], c[d, k]) for k in range(self.n_layers)] for d in range(2)]

    def keep_states(self, batch, final_states, kept_rows=None):
        """Writes `final_states[layer][direction] = (h, c)` into rows `0..batch-1` of the kept
        state; `kept_rows`, if given, is one bool `[batch]` per direction: the rows whose state
        is kept, the others' being zeroed."""
        for var, index in ((self.state_h, 0), (self.state_c, 1)):
            new = tf.stack([tf.stack([final_states[k][d][index] for k in range(self.n_layers)])
                            for d in range(2)])  # [direction, layer, batch, size]
            if kept_rows is not None:
                new *= tf.cast(tf.stack(kept_rows), new.dtype)[:, None, :, None]
            old = tf.convert_to_tensor(var)
            var.assign(tf.concat([new, old[:, :, batch:]], axis=2))

    def reset_states(self):
        """Zeroes the kept state (stateful stacks only)."""
        if self.stateful:
            self.state_h.assign(tf.zeros_like(self.state_h))
            self.state_c.assign(tf.zeros_like(self.state_c))

    # The kept state is the stack's only own variables, left out of saved weights.
    def save_own_variables(self, store):
        pass

    def load_own_variables(self, store):
        self.reset_states()

    def compute_mask(self, token_embeddings, mask=None):
        return None  # the output has a layer axis; callers keep the [batch, time] mask

    def compute_output_shape(self, input_shape):
        batch, time, _ = input_shape
        return (batch, self.n_layers + 1, time, 2 * self.projection_dim)

    def get_config(self):
        config = super().get_config()
        config.update(n_layers=self.n_layers, units=self.units,
                      projection_dim=self.projection_dim, cell_clip=self.cell_clip,
                      proj_clip=self.proj_clip, use_skip_connections=self.use_skip_connections,
                      stateful=self.stateful, max_batch_size=self.max_batch_size,
                      dropout=self.dropout)
        return config
