"""`BiLMStack`: ELMo's two independent LSTM language-model stacks and their layer outputs."""

import keras
import tensorflow as tf

from elmo_tf.layers.projected_lstm import removed_implementation, run_projected_lstms
from elmo_tf.layers.lstm_stack import LSTMStack
from elmo_tf.ops.lstm import reverse_valid_steps
from elmo_tf.ops.padding import sequence_lengths


@keras.saving.register_keras_serializable(package="elmo_tf")
class BiLMStack(LSTMStack):
    """Token embeddings `[batch, time, P]` -> biLM layers `[batch, n_layers + 1, time, 2P]`.

    `docs/conventions.md` §4.3: a forward stack (`RNN_0`) reads each sentence left
    to right and a backward stack (`RNN_1`) reads it right to left; layer k of a direction reads
    only that direction's layer k - 1; from the second layer on, a layer's input is added to its
    output (`use_skip_connections`). Output layer 0 is the token embedding duplicated,
    `[x; x]`, zeroed at padding (AllenNLP); layer k >= 1 is `[forward_k; backward_k]`, zero at
    padding. Each layer runs both directions in one exact recurrence loop.

    Dropout (pre-training, bilm-tf's `DropoutWrapper(input_keep_prob=1 - dropout)`): in training,
    the input of every LSTM layer is dropped out, and the residual connection adds the dropped-out
    input, as bilm-tf's wrapper order does (`ResidualWrapper` inside `DropoutWrapper`).

    Statefulness: by default every call starts from zero state, so a sentence always gets the same
    vectors. With `stateful=True` every call starts from the final state of the previous one, row
    by row, as bilm-tf and AllenNLP do (`LSTMStack` keeps it). The backward stack's kept state is
    the one after it read `<S>`.

    Args: those of `LSTMStack` (`n_layers`, `units`, `projection_dim`; by keyword
        `use_skip_connections`, `cell_clip`, `proj_clip`, `stateful`, `max_batch_size`,
        `dropout`: bilm-tf pre-trains with 0.1).

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

    def __init__(self, n_layers, units, projection_dim, **kwargs):
        super().__init__(n_layers, units, projection_dim, **removed_implementation(kwargs))

    def build(self, input_shape):
        for stack in self.stacks:
            for layer in stack:
                layer.build(tuple(input_shape[:-1]) + (self.projection_dim,))
        self.build_state()

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
        states = self.initial_states(batch, carry=self.stateful)

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
            self.keep_states(batch, final_states)
        return tf.stack(layers, axis=1)
