"""Masks and sequence lengths of padded ELMo inputs (right padding only)."""

import keras
import tensorflow as tf


def token_mask(tokens):
    """`tokens != ""` for string tokens `[batch, time]` (dense or ragged), symbolic inputs too."""
    if isinstance(tokens, tf.RaggedTensor):
        tokens = tokens.to_tensor(default_value="")
    return keras.ops.not_equal(tokens, "")


def char_ids_mask(char_ids):
    """A position holds a token iff any of its char ids is > 0 (all-zero rows are padding)."""
    return keras.ops.any(keras.ops.greater(char_ids, 0), axis=-1)


def sequence_lengths(mask):
    """Valid steps per row of a right-padded bool mask `[batch, time]`.

    Raises `InvalidArgumentError` (outside XLA, which drops run-time checks) when a padding
    position comes before a valid one: lengths counted from such a mask would silently mix
    tokens up.
    """
    mask = tf.convert_to_tensor(mask)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    tf.debugging.assert_equal(
        mask, tf.sequence_mask(lengths, tf.shape(mask)[1]),
        message="sequences must be right-padded: padding (all-zero char ids, \"\" tokens, a "
                "false mask) may only follow the last token of a sentence")
    return lengths


def check_right_padded(char_ids):
    """Raises a ValueError naming the row when a padding position (all-zero char ids) comes
    before a token; for eager tensors (graphs check at run time, outside XLA)."""
    if not tf.executing_eagerly() or isinstance(char_ids, keras.KerasTensor):
        return
    mask = tf.reduce_any(char_ids > 0, axis=-1)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    bad = tf.where(tf.reduce_any(mask != tf.sequence_mask(lengths, tf.shape(mask)[1]), axis=1))
    if tf.size(bad):
        raise ValueError(f"sequences must be right-padded: row {int(bad[0, 0])} has padding "
                         "(all-zero char ids, \"\" tokens) before a token; padding may only "
                         "follow the last token of a sentence.")
