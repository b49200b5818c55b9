"""BERT's masked-LM corruption of char-id sentences, as a stateless op (Masked ELMo's batches,
`masked_language_model_dataset`, draw its seeds): which tokens to predict, and what the model
reads in their place."""

import tensorflow as tf

from elmo_tf.text.char_ids import (
    BOS_CHAR,
    EOS_CHAR,
    MASK_CHAR,
    special_token_char_ids,
    tokens_to_char_ids,
)
from elmo_tf.text.vocabulary import Vocabulary
from elmo_tf.ops.random import stateless_uniform


def mask_tokens(char_ids, word_ids, seed, replacement_char_ids, rate=0.15, mask_rate=0.8,
                random_rate=0.1):
    """Selects tokens to predict and corrupts them, BERT's way.

    Of the real tokens (not padding, not `<S>`/`</S>`, and with a target id >= 0), each is
    selected with probability `rate`, independently (as Hugging Face's masked-LM collator
    does; BERT's own script drew a fixed count per sequence). A selected token is replaced by
    the mask token with probability `mask_rate`, by a random vocabulary word with probability
    `random_rate` (uniform over the rows of `replacement_char_ids`: the vocabulary's words,
    without `<S>`, `</S>` and `<UNK>`), and kept otherwise. The same `seed` gives the same result on every device and
    under XLA (`elmo_tf.ops.random.stateless_uniform`).

    Args:
        char_ids: int32 `[batch, time, chars]`, right-padded with all-zero rows.
        word_ids: int `[batch, time]`: each token's vocabulary id (the target), -1 where there
            is none (padding).
        seed: int32 `[2]`, the stateless seed.
        replacement_char_ids: int32 `[W, chars]`: the char ids of the words a random
            replacement may be (`replacement_table`).
        rate, mask_rate, random_rate: BERT's 0.15, 0.8, 0.1.

    Returns:
        `(masked_char_ids, targets)`: the char ids the model reads, and int32 `[batch, time]`
        targets: the word id where a token was selected, -1 elsewhere.
    """
    char_ids = tf.convert_to_tensor(char_ids, tf.int32)
    word_ids = tf.cast(word_ids, tf.int32)
    chars = char_ids.shape[-1]
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int32), 3)
    shape = tf.shape(word_ids)
    selected = real_tokens(char_ids, word_ids) & (stateless_uniform(shape, seeds[0]) < rate)
    action = stateless_uniform(shape, seeds[1])
    to_mask = selected & (action < mask_rate)
    to_random = selected & (action >= mask_rate) & (action < mask_rate + random_rate)
    words = tf.cast(tf.shape(replacement_char_ids)[0], tf.float64)
    random_ids = tf.cast(tf.floor(stateless_uniform(shape, seeds[2]) * words), tf.int32)
    random_chars = tf.gather(tf.cast(replacement_char_ids, tf.int32), random_ids)
    mask_chars = tf.constant(special_token_char_ids(MASK_CHAR, chars), tf.int32)
    masked = tf.where(to_mask[..., None], tf.broadcast_to(mask_chars, tf.shape(char_ids)),
                      tf.where(to_random[..., None], random_chars, char_ids))
    return masked, tf.where(selected, word_ids, -1)


def real_tokens(char_ids, word_ids):
    """bool `[batch, time]`: the tokens a masked LM may predict, those that are not padding
    (all-zero char ids), not `<S>` or `</S>`, and have a target id (`word_ids` >= 0): what
    `mask_tokens` selects from, and the cloze loss's targets on stream windows.

    Example:
    >>> real_tokens(tokens_to_char_ids([["<S>", "a", ""]]), [[0, 5, -1]])
    <tf.Tensor: ... [[False,  True, False]]>
    """
    char_ids = tf.convert_to_tensor(char_ids, tf.int32)
    chars = char_ids.shape[-1]
    if chars is None:
        raise ValueError("char_ids need a static last axis (max_characters_per_token).")
    boundary = [tf.constant(special_token_char_ids(c, chars), tf.int32)
                for c in (BOS_CHAR, EOS_CHAR)]
    is_boundary = tf.logical_or(tf.reduce_all(char_ids == boundary[0], axis=-1),
                                tf.reduce_all(char_ids == boundary[1], axis=-1))
    has_target = tf.cast(word_ids, tf.int32) >= 0
    return tf.reduce_any(char_ids > 0, axis=-1) & ~is_boundary & has_target


def replacement_table(tokens, max_characters_per_token):
    """NumPy int32 `[W, chars]`: the char ids of a vocabulary's words, `<S>`, `</S>` and
    `<UNK>` left out (wherever they are in it): what a random replacement may be."""
    words = [t for t in tokens if t not in Vocabulary.SPECIALS]
    if not words:
        raise ValueError("the vocabulary has no words besides <S>, </S> and <UNK>.")
    return tokens_to_char_ids([words], max_characters_per_token)[0].numpy()
