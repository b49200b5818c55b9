"""`BiLSTMStack`: Masked ELMo's fully bidirectional LSTM layers."""

import keras
import tensorflow as tf

from elmo_tf.layers.lstm_stack import LSTMStack
from elmo_tf.layers.projected_lstm import run_projected_lstms
from elmo_tf.ops.lstm import left_to_right_rows, reverse_valid_steps
from elmo_tf.ops.padding import sequence_lengths


@keras.saving.register_keras_serializable(package="elmo_tf")
class BiLSTMStack(LSTMStack):
    """Token embeddings `[batch, time, P]` -> layers `[batch, n_layers + 1, time, 2P]`.

    Unlike ELMo's `BiLMStack` (two independent stacks), layer k + 1 of *both* directions reads
    `[forward_k; backward_k]` of layer k, so from the second layer on every position sees the
    whole sentence on both sides (Masked ELMo, Senay & Salin 2020: "2 bidirectional LSTM
    layers"; see `docs/masked_elmo.md`). Such a model cannot be trained to predict the next
    token (layer 2 would see it through layer 1's backward half): it is trained with BERT's
    masked-LM objective (`MaskedElmoLanguageModel`).

    The cells are ELMo's projected LSTM, by default without clips, optionally without projection
    (the exact kernel, both directions of a layer in one loop). From the second layer on a layer's
    input `[2P]` is added to its output (`use_skip_connections`). Output layer 0 is the token
    embedding duplicated, `[x; x]`, as in ELMo, so that the backbone contract's layers line up;
    zeros at padding everywhere. Dropout (training only) on every layer's input, the residual
    adding the dropped-out input, as in `BiLMStack`.

    State: a call starts from zero state, unless it reads stream windows (`carry_state=True`,
    a stateful stack): bidirectional truncated backpropagation through time. Row `r` of a
    stream batch continues row `r` of the previous batch; the first `left_to_right_rows(batch)`
    rows read their stream left to right (each window is the one after the previous window in
    the text), and they carry the forward state of every layer from window to window; the
    other rows read their stream right to left (each window is the one before the previous
    window) and carry the backward state. The state a row does not carry starts at zero, so
    each direction continues exactly where it stopped, in half of the rows. Masked ELMo's
    stream batches (`elmo_tf.data.masked_language_model_dataset(mode="stream")`) are laid out
    this way; `docs/masked_elmo.md` says why.

    Args:
        n_layers: bidirectional layers.
        units: memory cell size C per direction.
        projection_dim: P, each direction's output size.
        use_skip_connections: residual connections from the second layer on.
        cell_clip, proj_clip: ELMo's clips, or None (Masked ELMo's presets).
        projection: False for cells without projection (`projection_dim` must equal `units`).
        stateful: keep state for stream windows (`LSTMStack`).
        max_batch_size: rows of kept state when stateful.
        dropout: dropout rate on every layer's input in training.

    Call arguments:
        token_embeddings: `[batch, time, P]`.
        mask: bool `[batch, time]`, right-padded.
        training: Python bool, for dropout.
        carry_state: Python bool: start from the kept state and keep the final one, as
            described above (stateful stacks only).

    Example:
    >>> stack = BiLSTMStack(n_layers=2, units=8, projection_dim=4)
    >>> stack(tf.random.normal([2, 5, 4]), mask=tf.sequence_mask([5, 3], 5)).shape
    TensorShape([2, 3, 5, 8])
    """

    def __init__(self, n_layers, units, projection_dim, *, projection=True, **kwargs):
        super().__init__(n_layers, units, projection_dim, projection=projection, **kwargs)
        self.projection = bool(projection)

    def build(self, input_shape):
        for k in range(self.n_layers):
            width = self.projection_dim * (1 if k == 0 else 2)
            for stack in self.stacks:
                stack[k].build(tuple(input_shape[:-1]) + (width,))
        self.build_state()

    def call(self, token_embeddings, mask=None, training=False, carry_state=False):
        if carry_state and not self.stateful:
            raise ValueError("carry_state=True needs a stateful BiLSTMStack (stateful=True).")
        x = tf.convert_to_tensor(token_embeddings)
        batch, time = tf.shape(x)[0], tf.shape(x)[1]
        if mask is None:
            mask = tf.ones([batch, time], tf.bool)
        lengths = sequence_lengths(mask)
        mask_f = tf.cast(mask, x.dtype)[:, :, None]
        layers = [tf.concat([x, x], axis=-1) * mask_f]
        x_tm = tf.transpose(x, [1, 0, 2])  # [time, batch, in]
        states = self.initial_states(batch, carry=carry_state)
        final_states = []
        for k in range(self.n_layers):
            inputs = x_tm
            if training and self.dropout > 0:
                inputs = tf.nn.dropout(inputs, rate=self.dropout)
            (forward, backward), finals = run_projected_lstms(
                [self.stacks[0][k], self.stacks[1][k]],
                [inputs, reverse_valid_steps(inputs, lengths)], lengths,
                [states[0][k], states[1][k]])
            final_states.append(finals)
            outputs = tf.concat([forward, reverse_valid_steps(backward, lengths)], axis=-1)
            if k > 0 and self.use_skip_connections:
                outputs = outputs + inputs
            x_tm = outputs
            layers.append(tf.transpose(outputs, [1, 0, 2]))
        if carry_state:
            left_to_right = tf.range(batch) < left_to_right_rows(batch)
            self.keep_states(batch, final_states, [left_to_right, ~left_to_right])
        return tf.stack(layers, axis=1)

    def get_config(self):
        config = super().get_config()
        config.update(projection=self.projection)
        return config
