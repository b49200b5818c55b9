"""`BiLMStack`: ELMo's two independent LSTM language-model stacks and their layer outputs."""

import keras
import tensorflow as tf

from elmo_tf.layers.projected_lstm import (
    ProjectedLSTM,
    removed_implementation,
    run_projected_lstms,
)
from elmo_tf.ops.lstm import reverse_valid_steps, zero_state
from elmo_tf.ops.padding import sequence_lengths


@keras.saving.register_keras_serializable(package="elmo_tf")
class BiLMStack(keras.layers.Layer):
    """Token embeddings `[batch, time, P]` -> biLM layers `[batch, n_layers + 1, time, 2P]`.

    `../shared/spec/elmo-reference.md` §4.3: a forward stack (`RNN_0`) reads each sentence left
    to right and a backward stack (`RNN_1`) reads it right to left; layer k of a direction reads
    only that direction's layer k - 1; from the second layer on, a layer's input is added to its
    output (`use_skip_connections`). Output layer 0 is the token embedding duplicated,
    `[x; x]`, zeroed at padding (AllenNLP); layer k >= 1 is `[forward_k; backward_k]`, zero at
    padding. Each layer runs both directions in one exact recurrence loop.

    Dropout (pre-training, bilm-tf's `DropoutWrapper(input_keep_prob=1 - dropout)`): in training,
    the input of every LSTM layer is dropped out, and the residual connection adds the dropped-out
    input, as bilm-tf's wrapper order does (`ResidualWrapper` inside `DropoutWrapper`).

    Statefulness: by default every call starts from zero state, so a sentence always gets the same
    vectors. With `stateful=True` the final `(h, c)` of every layer and direction is kept per batch
    row (in `max_batch_size` rows) and is the initial state of the next call, as bilm-tf and
    AllenNLP do: rows `0..batch-1` are read and overwritten, rows never seen start at zero, and
    `reset_states()` zeroes everything. The backward stack's kept state is the one after it read
    `<S>`. Under a `tf.distribute` strategy the kept state is per replica (an on-read variable):
    each replica carries the rows of its own part of the batch. Saved weights leave it out.

    Args:
        n_layers: LSTM layers per direction.
        units: memory cell size C.
        projection_dim: P.
        cell_clip, proj_clip: clip values or None.
        use_skip_connections: residual connections from the second layer on.
        stateful: carry state between calls.
        max_batch_size: rows of kept state when stateful.
        dropout: dropout rate on every LSTM layer's input in training (bilm-tf pre-trains with 0.1).

    Call arguments:
        token_embeddings: `[batch, time, P]` (sentence boundaries included).
        mask: bool `[batch, time]`, right-padded.
        backward_token_embeddings: optional `[batch, time, P]` for the backward stack when it reads
            other text than the forward one (bilm-tf's independent direction streams in
            pre-training); same shape and mask. Layer 0 is then `[forward input; backward input]`.
        training: Python bool, for dropout.

    Example:
    >>> stack = BiLMStack(n_layers=2, units=8, projection_dim=4)
    >>> stack(tf.random.normal([2, 5, 4]), mask=tf.sequence_mask([5, 3], 5)).shape
    TensorShape([2, 3, 5, 8])
    """

    def __init__(self, n_layers, units, projection_dim, cell_clip=None, proj_clip=None,
                 use_skip_connections=True, stateful=False, max_batch_size=128, dropout=0.0,
                 **kwargs):
        super().__init__(**removed_implementation(kwargs))
        self.n_layers = int(n_layers)
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.use_skip_connections = bool(use_skip_connections)
        self.stateful = bool(stateful)
        self.max_batch_size = int(max_batch_size)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        self.dropout = float(dropout)
        self.supports_masking = True
        self.stacks = [
            [ProjectedLSTM(units, projection_dim, cell_clip, proj_clip, direction=direction,
                           dtype=self.dtype_policy, name=f"{direction}_lstm_{k}")
             for k in range(self.n_layers)]
            for direction in ("forward", "backward")]

    def build(self, input_shape):
        for stack in self.stacks:
            for layer in stack:
                layer.build(tuple(input_shape[:-1]) + (self.projection_dim,))
        if self.stateful:
            rows = (2, self.n_layers, self.max_batch_size)
            # float32 under any policy, like the kernel's state (autocast would make it bf16);
            # on-read: one copy per replica under a distribution strategy.
            self.state_h, self.state_c = (
                keras.Variable(keras.initializers.Zeros()(rows + (size,)), trainable=False,
                               dtype="float32", autocast=False, synchronization="on_read",
                               aggregation="mean", name=name)
                for name, size in (("state_h", self.projection_dim), ("state_c", self.units)))

    @property
    def forward_layers(self):
        return self.stacks[0]

    @property
    def backward_layers(self):
        return self.stacks[1]

    def call(self, token_embeddings, mask=None, backward_token_embeddings=None, training=False):
        token_embeddings = tf.convert_to_tensor(token_embeddings)
        batch, time = tf.shape(token_embeddings)[0], tf.shape(token_embeddings)[1]
        if mask is None:
            mask = tf.ones([batch, time], tf.bool)
        lengths = sequence_lengths(mask)
        states = self._initial_states(batch)

        def to_batch_major(forward_tm, backward_tm):
            backward_tm = reverse_valid_steps(backward_tm, lengths)
            return tf.transpose(tf.concat([forward_tm, backward_tm], axis=-1), [1, 0, 2])

        if backward_token_embeddings is None:
            backward_token_embeddings = token_embeddings
        forward_tm = tf.transpose(token_embeddings, [1, 0, 2])
        backward_tm = reverse_valid_steps(tf.transpose(backward_token_embeddings, [1, 0, 2]),
                                          lengths)
        mask_f = tf.cast(mask, token_embeddings.dtype)[:, :, None]
        layers = [tf.concat([token_embeddings, backward_token_embeddings], axis=-1) * mask_f]
        final_states = []
        for k in range(self.n_layers):
            inputs = [forward_tm, backward_tm]
            if training and self.dropout > 0:
                inputs = [tf.nn.dropout(x, rate=self.dropout) for x in inputs]
            outputs, finals = run_projected_lstms(
                [self.stacks[0][k], self.stacks[1][k]], inputs, lengths, [states[0][k], states[1][k]])
            if k > 0 and self.use_skip_connections:
                outputs = [o + x for o, x in zip(outputs, inputs)]
            forward_tm, backward_tm = outputs
            layers.append(to_batch_major(forward_tm, backward_tm))
            final_states.append(finals)
        if self.stateful:
            self._keep_states(batch, final_states)
        return tf.stack(layers, axis=1)

    def _initial_states(self, batch):
        """`states[direction][layer] = (h, c)`, float32."""
        if not self.stateful:
            zeros = zero_state(batch, self.projection_dim, self.units)
            return [[zeros] * self.n_layers for _ in range(2)]
        message = (f"a stateful biLM keeps state for max_batch_size={self.max_batch_size} rows; "
                   "the batch is larger")
        static_batch = tf.get_static_value(batch)
        if static_batch is not None and static_batch > self.max_batch_size:
            raise ValueError(f"{message} ({static_batch}).")
        tf.debugging.assert_less_equal(batch, self.max_batch_size, message=message)
        h = tf.convert_to_tensor(self.state_h)[:, :, :batch]
        c = tf.convert_to_tensor(self.state_c)[:, :, :batch]
        return [[(h[d, k], c[d, k]) for k in range(self.n_layers)] for d in range(2)]

    def _keep_states(self, batch, final_states):
        """Writes the final states into rows `0..batch-1` of the kept state."""
        for var, index in ((self.state_h, 0), (self.state_c, 1)):
            new = tf.stack([tf.stack([final_states[k][d][index] for k in range(self.n_layers)])
                            for d in range(2)])
            old = tf.convert_to_tensor(var)
            var.assign(tf.concat([new, old[:, :, batch:]], axis=2))

    def reset_states(self):
        """Zeroes the kept state (stateful stacks only)."""
        if self.stateful:
            self.state_h.assign(tf.zeros_like(self.state_h))
            self.state_c.assign(tf.zeros_like(self.state_c))

    # The kept state is the stack's only own variables. It is transient (bilm-tf restarts from
    # zero state too) and per replica, so it is left out of saved weights: weights reload into
    # any `max_batch_size` and any number of replicas, and a reloaded stack starts from zero.
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
                      stateful=self.stateful,
                      max_batch_size=self.max_batch_size, dropout=self.dropout)
        return config
