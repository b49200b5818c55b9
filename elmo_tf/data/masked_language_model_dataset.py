"""Batches for `MaskedElmoLanguageModel`: sentences -> masked char ids and masked-LM targets."""

import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.data.char_ids import MAX_CHARACTERS_PER_TOKEN, tokens_to_char_ids
from elmo_tf.ops.chunking import shape_bucket_tensor
from elmo_tf.ops.masking import mask_tokens, replacement_table
from elmo_tf.ops.random import stateless_uniform


def masked_language_model_dataset(sentences, vocabulary, *, batch_size=32, masks_per_sentence=1,
                                  rate=0.15, shuffle_buffer=10_000, seed=0, repeat=True,
                                  pad_to_buckets=False,
                                  max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Batches of `(inputs, targets)` for `MaskedElmoLanguageModel`, in sentence mode.

    Every sentence is one row (the backbone adds `<S>`/`</S>` itself), right-padded to the
    longest of its batch. Its tokens are masked BERT's way (`MaskTokens`): `rate` of them
    selected, 80 % replaced by the mask token, 10 % by a random word, 10 % kept
    (`elmo_tf.ops.masking.mask_tokens`).

    Mask accumulation (`masks_per_sentence = K`): each sentence appears K times in a row of
    the same batch, each copy with its own, disjoint set of selected tokens: token i belongs
    to copy `(i + offset) mod K` (a strided split, `offset` drawn per sentence), and a copy
    keeps each of its tokens with probability `min(1, K * rate)`. So each copy selects `rate`
    of the sentence's tokens in expectation while `K * rate <= 1` (K times as many distinct
    tokens as one masking, at K times the recurrent compute); beyond that every token is
    predicted by exactly one copy, and each copy selects 1/K of them. See
    `docs/masked_elmo.md`.

    For training (`repeat=True`) the stream is endless, reshuffled on every pass and masked
    anew, deterministically from `seed`. For evaluation (`repeat=False`) the sentences are read
    once, in order, and the masking of the n-th sentence depends only on `seed` and n, so
    runs compare on the same held-out masking.

    Args:
        sentences: `tf.data.Dataset` of 1-D `tf.string` token tensors without boundaries.
        vocabulary: an `elmo_tf.data.Vocabulary` (targets; unknown words become `<UNK>`).
        batch_size: rows per batch (a multiple of `masks_per_sentence`).
        masks_per_sentence: K, copies of a sentence with disjoint masks (1: BERT's).
        rate: fraction of tokens selected per copy (see above), in (0, 1].
        shuffle_buffer: sentences in the shuffle buffer.
        seed: shuffle and masking seed.
        repeat: endless reshuffled passes (training) or one pass in order (evaluation).
        pad_to_buckets: pad each batch's time axis to its shape bucket
            (`elmo_tf.ops.chunking.shape_bucket`: under 25 % more, four sizes per doubling), so
            that XLA, which compiles a step once per shape, compiles a few shapes rather than
            one per sentence length. Set it when `fit` uses XLA (by default on one GPU).
        max_characters_per_token: char ids per token.

    Returns:
        `tf.data.Dataset` of `({"char_ids": int32 [rows, time, chars]},
        {"targets": int32 [rows, time]})`, targets -1 where nothing is predicted.

    Example:
    >>> ds = masked_language_model_dataset(read_corpus("train/*"), vocab, batch_size=64)
    >>> model.fit(ds, steps_per_epoch=1000)
    """
    check_positive_ints(batch_size=batch_size, masks_per_sentence=masks_per_sentence)
    k = int(masks_per_sentence)
    if batch_size % k:
        raise ValueError(f"batch_size ({batch_size}) must be a multiple of masks_per_sentence "
                         f"({k}): the copies of a sentence share a batch.")
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1]; got {rate!r}.")
    table = replacement_table(vocabulary.tokens, max_characters_per_token)
    # Per copy, the fraction of its own tokens (1/K of the sentence) that is kept selected.
    keep = min(1.0, rate * k)

    def encode(index, tokens):
        word_ids = vocabulary.lookup(tokens)
        char_ids = tokens_to_char_ids(tokens, max_characters_per_token)
        seed_pair = tf.stack([tf.constant(seed, tf.int64), index])
        seeds = tf.random.experimental.stateless_split(tf.cast(seed_pair, tf.int32), 3)
        n = tf.shape(word_ids)[0]
        offset = tf.cast(tf.floor(stateless_uniform([], seeds[0]) * k), tf.int32)
        owner = (tf.range(n) + offset) % k  # the copy that predicts each token
        thinned = stateless_uniform([n], seeds[1]) < keep
        copies = tf.range(k)[:, None]
        eligible = tf.where((owner[None, :] == copies) & thinned[None, :],
                            tf.broadcast_to(word_ids, [k, n]), -1)
        masked, targets = mask_tokens(
            tf.broadcast_to(char_ids, [k, n, max_characters_per_token]), eligible, seeds[2],
            table, rate=1.0)
        return tf.data.Dataset.from_tensor_slices(({"char_ids": masked}, {"targets": targets}))

    data = sentences.filter(lambda tokens: tf.size(tokens) > 0)
    if repeat:
        data = data.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    data = data.enumerate().flat_map(encode)
    data = data.padded_batch(
        batch_size, padded_shapes=({"char_ids": [None, max_characters_per_token]},
                                   {"targets": [None]}),
        padding_values=({"char_ids": 0}, {"targets": -1}), drop_remainder=repeat)
    if pad_to_buckets:
        def pad(inputs, targets):
            time = tf.shape(targets["targets"])[1]
            extra = shape_bucket_tensor(time) - time
            return ({"char_ids": tf.pad(inputs["char_ids"], [[0, 0], [0, extra], [0, 0]])},
                    {"targets": tf.pad(targets["targets"], [[0, 0], [0, extra]],
                                       constant_values=-1)})

        data = data.map(pad)
    return data.prefetch(tf.data.AUTOTUNE)

