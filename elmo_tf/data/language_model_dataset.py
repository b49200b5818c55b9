"""Batches for `ElmoLanguageModel`: sentences -> char ids and target ids, in `tf.data`.

Two batching modes (`docs/conventions.md` §7):

* ``"sentence"``: every sentence `<S> w1 .. wn </S>` is one row, batches are bucketed by length
  and right-padded; the forward stack predicts `w1 .. wn </S>` from `<S> .. wn`, the backward
  one `<S> w1 .. wn` from `w1 .. </S>`; the model starts each batch from zero state.
* ``"stream"`` (bilm-tf's): each batch row is a stream of sentences packed back to back into
  fixed windows of `window` tokens, continued by the same row of the next batch, so a stateful
  model carries the LSTM state across windows (truncated backpropagation through time). As in
  bilm-tf, a sentence gives `n + 1` (input, target) pairs (`</S>` is never an input) and the
  backward direction reads its own, independently shuffled stream of reversed sentences. Its
  windows are flipped back to left-to-right order, so position `t` of "backward_char_ids"
  holds a token whose backward target is the token before it in the text.

The packing of stream rows runs in Python (`tf.data.Dataset.from_generator`, a few
microseconds per token); the strings become char ids (`tokens_to_char_ids`) and vocabulary ids
(`Vocabulary.lookup`) in the graph.
"""

import numpy as np
import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.text.char_ids import (
    BOS_TOKEN,
    EOS_TOKEN,
    MAX_CHARACTERS_PER_TOKEN,
    tokens_to_char_ids,
)

MODES = ("sentence", "stream")
BUCKET_BOUNDARIES = (8, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 192, 256)
_LONG_BUCKET_STEP = 128  # `pad_to_buckets` beyond the last boundary
# A different shuffle seed for the backward stream, so the directions read different text.
_BACKWARD_SEED_OFFSET = 1_000_003


def language_model_dataset(sentences, vocabulary, *, mode="sentence", batch_size=32, window=20,
                           shuffle_buffer=10_000, seed=0, replicas=1, repeat=True,
                           pad_to_buckets=False,
                           max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Batches of `(inputs, targets)` for `ElmoLanguageModel`.

    For training (`repeat=True`) the stream is endless and the sentences are reshuffled on
    every pass, deterministically from `seed`, so the n-th batch is the same in every run with
    the same arguments: skipping the batches a run has already trained on resumes it exactly.
    Training length is set by `fit`'s `steps_per_epoch`, as bilm-tf sets it from the corpus's
    token count. For evaluation (`repeat=False`) the sentences are read once, in order; sentence
    batches keep a smaller last batch, and stream batches end when a row needs a sentence and
    none is left (the last, partial windows are not evaluated).

    Args:
        sentences: `tf.data.Dataset` of 1-D `tf.string` token tensors without boundaries
            (e.g. `elmo_tf.data.read_corpus(...)`).
        vocabulary: an `elmo_tf.data.Vocabulary` (targets; unknown words become `<UNK>`).
        mode: `"sentence"` or `"stream"` (see the module docstring).
        batch_size: rows per batch: sentences (sentence mode) or streams (stream mode).
        window: tokens per row in stream mode (bilm-tf's `unroll_steps`, 20).
        shuffle_buffer: sentences in the shuffle buffer.
        seed: shuffle seed.
        replicas: split every batch into this many consecutive equal parts, one element each
            (for `tf.distribute`, which deals a worker's elements to its replicas in turn: in
            stream mode a replica then always gets the same rows).
        repeat: endless reshuffled passes (training) or one pass in order (evaluation).
        pad_to_buckets: sentence mode: pad each batch to the longest length of its bucket
            (`BUCKET_BOUNDARIES` minus one; beyond them, a multiple of 128) rather than to its
            longest sentence, and a smaller last batch (`repeat=False`) to `batch_size` rows of
            padding, so batches take one shape per bucket instead of one per length: XLA
            compiles a step once per shape (`elmo-tf train` sets it when the step uses XLA).
            Stream batches have one shape anyway.
        max_characters_per_token: char ids per token.

    Returns:
        `tf.data.Dataset` of `(inputs, targets)`: inputs `{"char_ids"}` (plus
        `"backward_char_ids"` in stream mode), int32 `[rows, time, chars]`; targets
        `{"forward_targets", "backward_targets"}`, int32 `[rows, time]`, -1 where a position
        has nothing to predict.

    Example:
    >>> vocabulary = Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat"])
    >>> sentences = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([["the", "cat"]]))
    >>> inputs, targets = next(iter(language_model_dataset(sentences, vocabulary, batch_size=1)))
    >>> targets["forward_targets"].numpy().tolist()   # <S> the cat </S>
    [[3, 4, 1, -1]]
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
    check_positive_ints(batch_size=batch_size, window=window, shuffle_buffer=shuffle_buffer,
                        replicas=replicas)
    if batch_size % replicas:
        raise ValueError(f"batch_size ({batch_size}) must be a multiple of replicas ({replicas}).")
    with_boundaries = with_sentence_boundaries(sentences)

    def ordered(dataset, seed):
        return passes(dataset, seed, shuffle_buffer, repeat)

    if mode == "sentence":
        batches = ordered(with_boundaries, seed).bucket_by_sequence_length(
            lambda s: tf.shape(s)[0], list(BUCKET_BOUNDARIES),
            [batch_size] * (len(BUCKET_BOUNDARIES) + 1), padded_shapes=[None],
            padding_values="", drop_remainder=repeat)

        def to_model(tokens):
            if pad_to_buckets:
                tokens = _pad_to_bucket(tokens, batch_size)
            padding = tf.equal(tokens, "")
            ids = tf.where(padding, -1, vocabulary.lookup(tokens))
            edge = -tf.ones_like(ids[:, :1])
            return ({"char_ids": tokens_to_char_ids(tokens, max_characters_per_token)},
                    {"forward_targets": tf.concat([ids[:, 1:], edge], 1),
                     "backward_targets": tf.where(padding, -1, tf.concat([edge, ids[:, :-1]], 1))})
    else:
        backward = with_boundaries.map(lambda s: tf.reverse(s, [0]))
        streams = [ordered(with_boundaries, seed),
                   ordered(backward, seed + _BACKWARD_SEED_OFFSET)]
        spec = tf.TensorSpec([batch_size, window], tf.string)
        batches = tf.data.Dataset.from_generator(
            lambda: _stream_windows(streams, batch_size, window), output_signature=(spec,) * 4)

        def to_model(forward_inputs, forward_targets, backward_inputs, backward_targets):
            return ({"char_ids": tokens_to_char_ids(forward_inputs, max_characters_per_token),
                     "backward_char_ids": tokens_to_char_ids(
                         tf.reverse(backward_inputs, [1]), max_characters_per_token)},
                    {"forward_targets": vocabulary.lookup(forward_targets),
                     "backward_targets": vocabulary.lookup(tf.reverse(backward_targets, [1]))})

    batches = batches.map(to_model, num_parallel_calls=tf.data.AUTOTUNE)
    return split_for_replicas(batches, replicas).prefetch(tf.data.AUTOTUNE)


def with_sentence_boundaries(sentences):
    """The non-empty sentences, each as `<S> w1 .. wn </S>`."""
    return sentences.filter(lambda s: tf.size(s) > 0).map(
        lambda s: tf.concat([[BOS_TOKEN], s, [EOS_TOKEN]], 0))


def passes(dataset, seed, shuffle_buffer, repeat):
    """Endless passes over `dataset`, each reshuffled, deterministically from `seed`
    (`repeat`); or one pass in order."""
    if not repeat:
        return dataset
    # Made inside `flat_map`, the shuffle starts from `seed` in every iterator of the returned
    # dataset: its order does not depend on how many iterators were opened before (Keras opens
    # one to build the model under a strategy).
    return tf.data.Dataset.range(1).flat_map(lambda _: dataset.shuffle(
        shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat())


def split_for_replicas(batches, replicas):
    """Each batch of `(inputs, targets)` as `replicas` consecutive equal parts, one element
    each (`tf.distribute` deals a worker's elements to its replicas in turn, so in stream mode
    a replica always gets the same rows)."""
    if replicas == 1:
        return batches

    def split(tensor):
        shape = tf.shape(tensor)
        return tf.reshape(tensor, tf.concat([[replicas, shape[0] // replicas], shape[1:]], 0))

    return batches.flat_map(lambda x, y: tf.data.Dataset.from_tensor_slices(
        tf.nest.map_structure(split, (x, y))))


def bucket_length(length):
    """The longest length of the bucket of `length` (an int32 scalar tensor), as a tensor:
    `BUCKET_BOUNDARIES` minus one, beyond them a multiple of 128. Sentence batches padded to
    it (`pad_to_buckets`) take one shape per bucket: XLA compiles a step once per shape."""
    length = tf.convert_to_tensor(length, tf.int32)
    sizes = tf.constant([b - 1 for b in BUCKET_BOUNDARIES])
    # (Never under the last boundary: a multiple of 128 below it, 128 itself, is no bucket's.)
    beyond = tf.maximum(-(-length // _LONG_BUCKET_STEP) * _LONG_BUCKET_STEP,
                        BUCKET_BOUNDARIES[-1])
    return tf.reduce_min(tf.concat([tf.boolean_mask(sizes, sizes >= length), [beyond]], 0))


def _pad_to_bucket(tokens, rows):
    """`[rows', time]` tokens padded with "" to `rows` rows (a last, smaller evaluation batch)
    and to the longest length of time's bucket."""
    time = tf.shape(tokens)[1]
    return tf.pad(tokens, [[0, rows - tf.shape(tokens)[0]], [0, bucket_length(time) - time]],
                  constant_values="")


def _stream_windows(streams, rows, window):
    """Yields `(forward inputs, forward targets, backward inputs, backward targets)`, string
    arrays `[rows, window]`; the backward ones in reading (right-to-left) order."""
    packers = [StreamPacker(stream.as_numpy_iterator(), rows, window) for stream in streams]
    while True:
        try:
            yield *packers[0].next_window(), *packers[1].next_window()
        except StopIteration:  # one pass read to its end
            return


class StreamPacker:
    """bilm-tf's stream batching: row `r` of successive windows continues one token stream.

    Args:
        sentences: an iterator of token arrays, boundaries included.
        rows: streams (rows of a window).
        window: tokens per row.
        next_token: windows of (input, next-token target) pairs, as bilm-tf's (`</S>` is never
            an input; a sentence gives `n + 1` pairs); else every token is an input and there
            are no targets (the masked LM's windows).
    """

    def __init__(self, sentences, rows, window, next_token=True):
        self.sentences = sentences
        self.window = window
        self.shift = int(next_token)
        self.current = [np.empty(0, object)] * rows  # each row's sentence, boundaries included
        self.position = [0] * rows                   # its next input token

    def next_window(self):
        """`(inputs, targets)`, object arrays `[rows, window]` (targets None without
        `next_token`); StopIteration when the sentences end."""
        rows = len(self.current)
        inputs = np.empty((rows, self.window), object)
        targets = np.empty((rows, self.window), object) if self.shift else None
        for r in range(rows):
            filled = 0
            while filled < self.window:
                usable = len(self.current[r]) - self.shift
                if self.position[r] >= usable:  # (only </S> left): the next sentence
                    self.current[r], self.position[r] = next(self.sentences), 0
                    usable = len(self.current[r]) - self.shift
                start = self.position[r]
                n = min(usable - start, self.window - filled)
                inputs[r, filled:filled + n] = self.current[r][start:start + n]
                if self.shift:
                    targets[r, filled:filled + n] = self.current[r][start + 1:start + n + 1]
                self.position[r] += n
                filled += n
        return inputs, targets
