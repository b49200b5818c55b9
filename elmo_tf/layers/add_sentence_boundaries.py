"""`AddSentenceBoundaries`: wraps each sentence of char ids in `<S>` ... `</S>`."""

import keras
import tensorflow as tf

from elmo_tf.text.char_ids import BOS_CHAR, EOS_CHAR, special_token_char_ids
from elmo_tf.ops.padding import char_ids_mask, sequence_lengths


@keras.saving.register_keras_serializable(package="elmo_tf")
class AddSentenceBoundaries(keras.layers.Layer):
    """Char ids `[batch, time, chars]` -> (`[batch, time + 2, chars]`, mask `[batch, time + 2]`).

    AllenNLP's `add_sentence_boundary_token_ids`: a sentence of n tokens (rows with any id > 0,
    right-padded with all-zero rows) becomes `<S>` at position 0, its tokens at 1..n, `</S>` at
    n + 1 and all-zero rows after; the mask has n + 2 true entries. An empty sentence becomes
    `<S> </S>`. Padding rows in the middle of a sentence are rejected.

    Example:
    >>> ids = tokens_to_char_ids([["a", "b"], ["c", ""]])
    >>> with_boundaries, mask = AddSentenceBoundaries()(ids)
    >>> with_boundaries.shape, mask.numpy().sum(axis=1).tolist()
    (TensorShape([2, 4, 50]), [4, 3])
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)

    def call(self, char_ids):
        char_ids = tf.convert_to_tensor(char_ids)
        lengths = sequence_lengths(char_ids_mask(char_ids))
        time = tf.shape(char_ids)[1]
        chars = char_ids.shape[-1]
        batch = tf.shape(char_ids)[0]
        bos = tf.constant(special_token_char_ids(BOS_CHAR, chars), char_ids.dtype)
        eos = tf.constant(special_token_char_ids(EOS_CHAR, chars), char_ids.dtype)
        padded = tf.concat(
            [tf.tile(bos[None, None], [batch, 1, 1]), char_ids,
             tf.zeros([batch, 1, chars], char_ids.dtype)], axis=1)
        position = tf.range(time + 2)[None, :]
        is_eos = tf.equal(position, lengths[:, None] + 1)
        padded = tf.where(is_eos[..., None], eos, padded)
        return padded, position < lengths[:, None] + 2

    def compute_output_spec(self, char_ids):
        batch, time, chars = char_ids.shape
        time = None if time is None else time + 2
        return (keras.KerasTensor((batch, time, chars), dtype=char_ids.dtype),
                keras.KerasTensor((batch, time), dtype="bool"))
