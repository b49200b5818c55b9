"""Batches for `MaskedElmoLanguageModel`: sentences -> masked char ids and masked-LM targets."""

import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.text.char_ids import MAX_CHARACTERS_PER_TOKEN, tokens_to_char_ids
from elmo_tf.data.language_model_dataset import (
    BUCKET_BOUNDARIES,
    MODES,
    StreamPacker,
    bucket_length,
    passes,
    split_for_replicas,
    with_sentence_boundaries,
)
from elmo_tf.ops.lstm import left_to_right_rows
from elmo_tf.ops.masking import mask_tokens, real_tokens, replacement_table
from elmo_tf.ops.random import stateless_uniform

# A different shuffle seed for the streams read right to left.
_RIGHT_TO_LEFT_SEED_OFFSET = 1_000_003


def masked_language_model_dataset(sentences, vocabulary, *, mode="sentence", batch_size=32,
                                  masks_per_sentence=1, rate=0.15, window=20,
                                  shuffle_buffer=10_000, seed=0, replicas=1, repeat=True,
                                  pad_to_buckets=False, next_token_targets=False,
                                  cloze_targets=False,
                                  max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Batches of `(inputs, targets)` for `MaskedElmoLanguageModel`.

    Sentence mode: every sentence is one row (the backbone adds `<S>`/`</S>` itself),
    batches are bucketed by length (as ELMo's, `language_model_dataset`) and right-padded to
    the longest of their rows. Its tokens are masked BERT's way:
    `rate` of them selected, 80 % replaced by the mask token, 10 % by a random word, 10 % kept
    (`elmo_tf.ops.masking.mask_tokens`).

    Mask accumulation (`masks_per_sentence = K`): each sentence appears K times in a row of
    the same batch, each copy with its own, disjoint set of selected tokens: token i belongs
    to copy `(i + offset) mod K` (a strided split, `offset` drawn per sentence), and a copy
    keeps each of its tokens with probability `min(1, K * rate)`. So each copy selects `rate`
    of the sentence's tokens in expectation while `K * rate <= 1` (K times as many distinct
    tokens as one masking, at K times the recurrent compute); beyond that every token is
    predicted by exactly one copy, and each copy selects 1/K of them. See
    `docs/masked_elmo.md`.

    Next-token targets (sentence mode, `next_token_targets=True`): the targets also hold, on
    the `<S> w1 .. wn </S>` grid the backbone runs on (`time + 2` positions), the next word of
    every position, `"forward_targets"` (`w1 .. wn </S>`, -1 at `</S>`), and the previous one,
    `"backward_targets"` (-1 at `<S>`, then `<S> w1 .. wn`): what ELMo's two language models
    predict, for `MaskedElmoLanguageModel`'s next-token loss on its first layer (every copy
    of a sentence has them).

    Cloze targets (`cloze_targets=True`): `"cloze_targets"` int32 `[rows, time]`, every
    token's word id, selected or not (-1 at padding): what `MaskedElmoLanguageModel`'s cloze
    loss predicts at each token from the first layer's halves on either side of it. In stream
    mode -1 also at `<S>`, `</S>` (as in sentence mode, only words are predicted) and at a
    window's first and last tokens, whose neighbour on one side is in another window.

    Stream mode (bidirectional truncated backpropagation through time): each row is a stream
    of sentences `<S> w1 .. wn </S>` packed back to back into windows of `window` tokens, and
    row `r` of the next batch continues it; of each replica's rows, the first
    `left_to_right_rows(rows)` read their stream left to right, the others read theirs right
    to left (the next window is the one before, in the text; tokens within a window are in
    text order), from an independently shuffled sentence order. `MaskedElmoLanguageModel`
    carries each row's state in its reading direction (`BiLSTMStack`). A window's tokens are
    masked as in sentence mode (the boundaries are never selected); `masks_per_sentence` must
    be 1. Inputs are `{"stream_char_ids"}`.

    For training (`repeat=True`) the stream is endless, reshuffled on every pass and masked
    anew, deterministically from `seed`. For evaluation (`repeat=False`) the sentences are read
    once, in order, and the masking of the n-th sentence depends only on `seed` and n, so
    runs compare on the same held-out masking.

    Args:
        sentences: `tf.data.Dataset` of 1-D `tf.string` token tensors without boundaries.
        vocabulary: an `elmo_tf.data.Vocabulary` (targets; unknown words become `<UNK>`).
        mode: `"sentence"` or `"stream"` (above).
        batch_size: rows per batch (a multiple of `masks_per_sentence`, and of `replicas`).
        masks_per_sentence: K, copies of a sentence with disjoint masks (1: BERT's).
        rate: fraction of tokens selected per copy (see above), in (0, 1].
        window: stream mode: tokens per row.
        shuffle_buffer: sentences in the shuffle buffer.
        seed: shuffle and masking seed.
        replicas: stream mode: split every batch into this many consecutive equal parts, one
            element each, each laid out as above (for `tf.distribute`: a replica then always
            gets the same rows). With an even number of rows per replica, the batch holds the
            same rows, read the same ways, whatever the number of replicas.
        repeat: endless reshuffled passes (training) or one pass in order (evaluation).
        pad_to_buckets: sentence mode: pad each batch as ELMo's (`language_model_dataset`):
            the `<S> .. </S>` grid to its bucket's longest length (`bucket_length`), and a
            smaller last batch (`repeat=False`) to `batch_size` rows of padding, so that XLA,
            which compiles a step once per shape, compiles one shape per bucket rather than
            one per sentence length and batch size. Set it when `fit` uses XLA (by default on
            one GPU). Stream batches have one shape anyway.
        next_token_targets: add the next-token targets (sentence mode; above).
        cloze_targets: add the cloze targets (above).
        max_characters_per_token: char ids per token.

    Returns:
        `tf.data.Dataset` of `({"char_ids": int32 [rows, time, chars]},
        {"targets": int32 [rows, time]})` (`"stream_char_ids"` in stream mode; with
        `cloze_targets`, `"cloze_targets"` int32 `[rows, time]`; with
        `next_token_targets`, `"forward_targets"` and `"backward_targets"` int32
        `[rows, time + 2]` too), targets -1 where nothing is predicted.

    Example:
    >>> ds = masked_language_model_dataset(read_corpus("train/*"), vocab, batch_size=64)
    >>> model.fit(ds, steps_per_epoch=1000)
    """
    check_positive_ints(batch_size=batch_size, masks_per_sentence=masks_per_sentence,
                        window=window, replicas=replicas)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
    k = int(masks_per_sentence)
    if batch_size % k:
        raise ValueError(f"batch_size ({batch_size}) must be a multiple of masks_per_sentence "
                         f"({k}): the copies of a sentence share a batch.")
    if batch_size % replicas:
        raise ValueError(f"batch_size ({batch_size}) must be a multiple of replicas ({replicas}).")
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1]; got {rate!r}.")
    table = replacement_table(vocabulary.tokens, max_characters_per_token)
    if mode == "stream":
        if k != 1:
            raise ValueError(f"stream batches take masks_per_sentence 1 (mask accumulation "
                             f"copies sentences, sentence mode); got {k}.")
        if next_token_targets:
            raise ValueError("next_token_targets is for sentence batches (the targets are on "
                             "each sentence's <S> .. </S> grid).")
        return _stream_batches(sentences, vocabulary, table, batch_size, window, rate,
                               shuffle_buffer, seed, replicas, repeat, max_characters_per_token,
                               cloze_targets)
    if replicas != 1:
        raise ValueError("replicas is for stream batches; sentence batches carry no state, so "
                         "a strategy deals whole batches to its replicas.")
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
        targets = {"targets": targets}
        if cloze_targets:  # every token, selected or not
            targets["cloze_targets"] = tf.broadcast_to(word_ids, [k, n])
        if next_token_targets:  # on the <S> w1 .. wn </S> grid
            bos, eos, none = ([tf.constant(v, tf.int32)] for v in (
                vocabulary.bos_id, vocabulary.eos_id, -1))
            grid = {"forward_targets": tf.concat([word_ids, eos, none], 0),
                    "backward_targets": tf.concat([none, bos, word_ids], 0)}
            targets.update({name: tf.broadcast_to(value, [k, n + 2])
                            for name, value in grid.items()})
        return tf.data.Dataset.from_tensor_slices(({"char_ids": masked}, targets))

    data = passes(sentences.filter(lambda tokens: tf.size(tokens) > 0), seed, shuffle_buffer,
                  repeat)
    data = data.enumerate().flat_map(encode)
    # Bucketed by length as ELMo's sentence batches (the LSTMs run `<S> .. </S>`, n + 2 steps):
    # a batch of random sentences runs its LSTMs over the longest of them. A sentence's K
    # copies arrive together and go to the same bucket, whose batches are a multiple of K, so
    # they share a batch.
    target_names = (["targets"] + (["cloze_targets"] if cloze_targets else [])
                    + (["forward_targets", "backward_targets"] if next_token_targets else []))
    data = data.bucket_by_sequence_length(
        lambda inputs, targets: tf.shape(targets["targets"])[0] + 2, list(BUCKET_BOUNDARIES),
        [batch_size] * (len(BUCKET_BOUNDARIES) + 1),
        padded_shapes=({"char_ids": [None, max_characters_per_token]},
                       {name: [None] for name in target_names}),
        padding_values=({"char_ids": 0}, {name: -1 for name in target_names}),
        drop_remainder=repeat)
    if pad_to_buckets:
        def pad(inputs, targets):
            # As ELMo's sentence batches: the grid the LSTMs run, <S> w1 .. wn </S>, padded to
            # its bucket's longest length, and a last, smaller batch (evaluation) to
            # `batch_size` rows of padding (empty sentences, nothing to predict).
            rows, time = tf.unstack(tf.shape(targets["targets"]))
            padding = [[0, batch_size - rows], [0, bucket_length(time + 2) - 2 - time]]
            return ({"char_ids": tf.pad(inputs["char_ids"], padding + [[0, 0]])},
                    {name: tf.pad(value, padding, constant_values=-1)
                     for name, value in targets.items()})

        data = data.map(pad)
    return data.prefetch(tf.data.AUTOTUNE)


def _stream_batches(sentences, vocabulary, table, batch_size, window, rate, shuffle_buffer, seed,
                    replicas, repeat, chars, cloze_targets):
    rows = batch_size // replicas
    forward_rows = left_to_right_rows(rows)
    backward_rows = rows - forward_rows
    sentences = with_sentence_boundaries(sentences)
    streams = [passes(sentences, seed, shuffle_buffer, repeat),
               passes(sentences.map(lambda s: tf.reverse(s, [0])),
                      seed + _RIGHT_TO_LEFT_SEED_OFFSET, shuffle_buffer, repeat)]

    def windows():
        forward, backward = (
            StreamPacker(stream.as_numpy_iterator(), replicas * n, window, next_token=False)
            for stream, n in zip(streams, (forward_rows, backward_rows)))
        while True:
            try:
                left_to_right, _ = forward.next_window()
                right_to_left, _ = backward.next_window()
            except StopIteration:  # one pass read to its end
                return
            yield left_to_right, right_to_left[:, ::-1]  # each window back in text order

    def encode(index, streams):
        left_to_right, right_to_left = streams
        # Each group of streams masked on its own, so a row's masking does not depend on how
        # the rows are dealt to replicas (2 replicas train as 1 on the same rows).
        parts = []
        for group, (tokens, rows) in enumerate(((left_to_right, forward_rows),
                                                (right_to_left, backward_rows))):
            seed_pair = tf.cast(tf.stack([tf.constant(seed, tf.int64), 2 * index + group]),
                                tf.int32)
            char_ids, ids = tokens_to_char_ids(tokens, chars), vocabulary.lookup(tokens)
            masked, targets = mask_tokens(char_ids, ids, seed_pair, table, rate=rate)
            part = [tf.reshape(masked, [replicas, rows, window, chars]),
                    tf.reshape(targets, [replicas, rows, window])]
            if cloze_targets:  # the words a masked LM may predict, inside the window
                inside = tf.range(window)
                words = real_tokens(char_ids, ids) & ((inside > 0) & (inside < window - 1))[None]
                part.append(tf.reshape(tf.where(words, tf.cast(ids, tf.int32), -1),
                                       [replicas, rows, window]))
            parts.append(part)
        # Replica i's rows: its left-to-right rows, then its right-to-left ones.
        masked, *targets = (tf.reshape(tf.concat([a, b], 1), [batch_size, window] + tail)
                            for a, b, tail in zip(*parts, ([chars], [], [])))
        return {"stream_char_ids": masked}, dict(zip(("targets", "cloze_targets"), targets))

    specs = (tf.TensorSpec([replicas * forward_rows, window], tf.string),
             tf.TensorSpec([replicas * backward_rows, window], tf.string))
    batches = tf.data.Dataset.from_generator(windows, output_signature=specs)
    batches = batches.enumerate().map(encode, num_parallel_calls=tf.data.AUTOTUNE)
    return split_for_replicas(batches, replicas).prefetch(tf.data.AUTOTUNE)
