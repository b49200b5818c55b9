"""`BiLSTMStack`: Masked ELMo's fully bidirectional LSTM layers."""

import keras
import tensorflow as tf

from elmo_tf.layers.projected_lstm import ProjectedLSTM, run_projected_lstms
from elmo_tf.ops.lstm import reverse_valid_steps, zero_state
from elmo_tf.ops.padding import sequence_lengths


@keras.saving.register_keras_serializable(package="elmo_tf")
class BiLSTMStack(keras.layers.Layer):
    """Token embeddings `[batch, time, P]` -> layers `[batch, n_layers + 1, time, 2P]`.

    Unlike ELMo's `BiLMStack` (two independent stacks), layer k + 1 of *both* directions reads
    `[forward_k; backward_k]` of layer k, so from the second layer on every position sees the
    whole sentence on both sides (Masked ELMo, Senay & Salin 2020: "2 bidirectional LSTM
    layers"; see `docs/masked_elmo.md`). Such a model cannot be trained to predict the next
    token (layer 2 would see it through layer 1's backward half): it is trained with BERT's
    masked-LM objective (`MaskedElmoLanguageModel`).

    The cells are ELMo's projected LSTM without clips (the exact kernel, both directions of a
    layer in one loop). From the second layer on a layer's input `[2P]` is added to its output
    (`use_skip_connections`). Output layer 0 is the token embedding duplicated, `[x; x]`, as in
    ELMo, so that the backbone contract's layers line up; zeros at padding everywhere. Dropout
    (training only) on every layer's input, the residual adding the dropped-out input, as in
    `BiLMStack`. Every call starts from zero state.

    Args:
        n_layers: bidirectional layers.
        units: memory cell size C per direction.
        projection_dim: P, each direction's output size.
        use_skip_connections: residual connections from the second layer on.
        dropout: dropout rate on every layer's input in training.

    Call arguments:
        token_embeddings: `[batch, time, P]`.
        mask: bool `[batch, time]`, right-padded.
        training: Python bool, for dropout.

    Example:
    >>> stack = BiLSTMStack(n_layers=2, units=8, projection_dim=4)
    >>> stack(tf.random.normal([2, 5, 4]), mask=tf.sequence_mask([5, 3], 5)).shape
    TensorShape([2, 3, 5, 8])
    """

    def __init__(self, n_layers, units, projection_dim, use_skip_connections=True, dropout=0.0,
                 **kwargs):
        super().__init__(**kwargs)
        self.n_layers = int(n_layers)
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.use_skip_connections = bool(use_skip_connections)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        self.dropout = float(dropout)
        self.supports_masking = True
        self.stacks = [
            [ProjectedLSTM(units, projection_dim, direction=direction, dtype=self.dtype_policy,
                           name=f"{direction}_lstm_{k}") for k in range(self.n_layers)]
            for direction in ("forward", "backward")]

    def build(self, input_shape):
        for k in range(self.n_layers):
            width = self.projection_dim * (1 if k == 0 else 2)
            for stack in self.stacks:
                stack[k].build(tuple(input_shape[:-1]) + (width,))

    def call(self, token_embeddings, mask=None, training=False):
        x = tf.convert_to_tensor(token_embeddings)
        batch, time = tf.shape(x)[0], tf.shape(x)[1]
        if mask is None:
            mask = tf.ones([batch, time], tf.bool)
        lengths = sequence_lengths(mask)
        mask_f = tf.cast(mask, x.dtype)[:, :, None]
        layers = [tf.concat([x, x], axis=-1) * mask_f]
        x_tm = tf.transpose(x, [1, 0, 2])  # [time, batch, in]
        zeros = zero_state(batch, self.projection_dim, self.units)
        for k in range(self.n_layers):
            inputs = x_tm
            if training and self.dropout > 0:
                inputs = tf.nn.dropout(inputs, rate=self.dropout)
            (forward, backward), _ = run_projected_lstms(
                [self.stacks[0][k], self.stacks[1][k]],
                [inputs, reverse_valid_steps(inputs, lengths)], lengths, [zeros, zeros])
            outputs = tf.concat([forward, reverse_valid_steps(backward, lengths)], axis=-1)
            if k > 0 and self.use_skip_connections:
                outputs = outputs + inputs
            x_tm = outputs
            layers.append(tf.transpose(outputs, [1, 0, 2]))
        return tf.stack(layers, axis=1)

    def compute_mask(self, token_embeddings, mask=None):
        return None  # the output has a layer axis; callers keep the [batch, time] mask

    def compute_output_shape(self, input_shape):
        batch, time, _ = input_shape
        return (batch, self.n_layers + 1, time, 2 * self.projection_dim)

    def get_config(self):
        config = super().get_config()
        config.update(n_layers=self.n_layers, units=self.units,
                      projection_dim=self.projection_dim,
                      use_skip_connections=self.use_skip_connections, dropout=self.dropout)
        return config
