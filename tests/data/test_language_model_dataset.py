"""language_model_dataset: sentence and stream batches against plain-Python expectations."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.text.char_ids import tokens_to_char_ids
from elmo_tf.data.language_model_dataset import (
    BUCKET_BOUNDARIES,
    bucket_length,
    language_model_dataset,
)
from elmo_tf.text.vocabulary import Vocabulary
from tests.conftest import assert_skipping_resumes_exactly

WORDS = [f"w{i}" for i in range(30)]
VOCAB = Vocabulary(["<S>", "</S>", "<UNK>"] + WORDS[:25])  # w25..w29 are unknown
SENTENCES = [WORDS[j:j + 2 + j % 5] for j in range(24)]


def _dataset(**kwargs):
    sentences = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(SENTENCES))
    return language_model_dataset(sentences, VOCAB, **kwargs)


def _id(token):
    return VOCAB.token_id(token) if token in VOCAB else VOCAB.unk_id


def _decode(char_ids):
    """Token strings back from char ids (bytes between begin- and end-of-word)."""
    tokens = []
    for row in char_ids:
        if not row.any():
            tokens.append("")
        elif row[1] in (257, 258):
            tokens.append("<S>" if row[1] == 257 else "</S>")
        else:
            body = row[1:list(row).index(260)]
            tokens.append(bytes(int(c) - 1 for c in body).decode())
    return tokens


def test_sentence_batches_hold_each_sentence_with_its_targets():
    seen = collections.Counter()
    for inputs, targets in _dataset(batch_size=4, repeat=False):
        assert set(inputs) == {"char_ids"}
        for ids, forward, backward in zip(inputs["char_ids"].numpy(),
                                          targets["forward_targets"].numpy(),
                                          targets["backward_targets"].numpy()):
            tokens = [t for t in _decode(ids) if t]
            n = len(tokens)
            assert tokens[0] == "<S>" and tokens[-1] == "</S>"
            ids_ = [_id(t) for t in tokens]
            assert forward.tolist() == ids_[1:] + [-1] * (len(forward) - n + 1)
            assert backward.tolist() == [-1] + ids_[:-1] + [-1] * (len(backward) - n)
            np.testing.assert_array_equal(ids[:n], tokens_to_char_ids([tokens])[0])
            seen[" ".join(tokens[1:-1])] += 1
    assert seen == collections.Counter(" ".join(s) for s in SENTENCES)  # one pass, every one


def test_sentence_batches_are_bucketed_by_length():
    """Every batch's sentences (with boundaries) fall in one bucket of `BUCKET_BOUNDARIES`:
    with lengths from 3 to 72, unbucketed batches of 4 would mix buckets."""
    rng = np.random.default_rng(0)
    sentences = [WORDS[:1] * int(n) for n in rng.integers(1, 71, 200)]
    dataset = language_model_dataset(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences)), VOCAB, batch_size=4,
        seed=1)
    edges = [0, *BUCKET_BOUNDARIES, np.inf]
    for inputs, _ in dataset.take(30):
        lengths = (np.abs(inputs["char_ids"].numpy()).sum(-1) > 0).sum(1)
        buckets = {np.searchsorted(edges, n, side="right") for n in lengths}
        assert len(buckets) == 1, lengths


def test_every_length_of_a_bucket_is_padded_to_one_length():
    # The buckets of `bucket_by_sequence_length`: [0, 8), [8, 12), ..., [192, 256), then past
    # the last boundary a multiple of 128.
    edges = [0, *BUCKET_BOUNDARIES]
    for low, high in zip(edges, edges[1:]):
        assert {int(bucket_length(n)) for n in range(max(low, 1), high)} == {high - 1}
    assert [int(bucket_length(n)) for n in (256, 257, 384, 385)] == [256, 384, 384, 512]


def test_padded_to_buckets_sentence_batches_take_few_shapes_and_the_same_content():
    """For XLA (one compilation per shape): every batch is padded to its bucket's longest length
    (boundary - 1; past the last boundary, a multiple of 128), with padding that predicts
    nothing, and otherwise equals the batch padded to its longest sentence."""
    long_sentences = SENTENCES + [[f"w{i % 30}" for i in range(300)]]
    sentences = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(long_sentences))
    plain = language_model_dataset(sentences, VOCAB, batch_size=3, repeat=False)
    padded = language_model_dataset(sentences, VOCAB, batch_size=3, repeat=False,
                                     pad_to_buckets=True)
    sizes = set()
    for (inputs, targets), (bucketed, bucketed_targets) in zip(plain, padded):
        rows, time = inputs["char_ids"].shape[:2]
        assert bucketed["char_ids"].shape[0] == 3  # a smaller last batch too
        size = bucketed["char_ids"].shape[1]
        assert size == (min(b - 1 for b in BUCKET_BOUNDARIES if b - 1 >= time)
                        if time < BUCKET_BOUNDARIES[-1] else -(-time // 128) * 128)
        sizes.add(size)
        np.testing.assert_array_equal(bucketed["char_ids"][:rows, :time], inputs["char_ids"])
        assert not bucketed["char_ids"][:, time:].numpy().any()
        assert not bucketed["char_ids"][rows:].numpy().any()
        for key in targets:
            np.testing.assert_array_equal(bucketed_targets[key][:rows, :time], targets[key])
            assert (bucketed_targets[key][:, time:].numpy() == -1).all()
            assert (bucketed_targets[key][rows:].numpy() == -1).all()
    assert 384 in sizes and sizes <= {b - 1 for b in BUCKET_BOUNDARIES} | {384}


def _stream_rows(batches, key, targets_key, reverse):
    """Per row: the (input, target) token pairs in reading order, over consecutive batches."""
    rows = collections.defaultdict(list)
    for inputs, targets in batches:
        for r, (ids, target) in enumerate(zip(inputs[key].numpy(), targets[targets_key].numpy())):
            pairs = list(zip(_decode(ids), target.tolist()))
            rows[r].extend(pairs[::-1] if reverse else pairs)
    return rows


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_stream_rows_continue_sentences_across_windows(direction):
    """Each row reads whole sentences back to back across batch boundaries, every sentence
    giving its n + 1 (input, next token) pairs in the direction's reading order."""
    backward = direction == "backward"
    batches = list(_dataset(mode="stream", batch_size=3, window=5, seed=2).take(12))
    assert set(batches[0][0]) == {"char_ids", "backward_char_ids"}
    key = "backward_char_ids" if backward else "char_ids"
    start, end = ("</S>", "<S>") if backward else ("<S>", "</S>")
    sentences = {" ".join(s[::-1] if backward else s) for s in SENTENCES}
    complete = 0
    for pairs in _stream_rows(batches, key, f"{direction}_targets", backward).values():
        tokens = [token for token, _ in pairs]
        for (token, target), following in zip(pairs, tokens[1:] + [None]):
            if following is not None and following != start:
                assert target == _id(following)  # the target is the next token read
            if following == start:
                assert target == _id(end)       # a sentence ends: its last pair
        starts = [i for i, t in enumerate(tokens) if t == start]
        for a, b in zip(starts, starts[1:]):   # whole sentences between two starts
            assert " ".join(tokens[a + 1:b]) in sentences
            complete += 1
    assert complete >= 10


def test_stream_splits_batches_into_consecutive_row_blocks_per_replica():
    whole = list(_dataset(mode="stream", batch_size=4, window=3, seed=3).take(3))
    split = list(_dataset(mode="stream", batch_size=4, window=3, seed=3, replicas=2).take(6))
    for step, (inputs, targets) in enumerate(whole):
        for replica in range(2):
            part_inputs, part_targets = split[2 * step + replica]
            rows = slice(2 * replica, 2 * replica + 2)
            for key in inputs:
                np.testing.assert_array_equal(part_inputs[key], inputs[key][rows])
            for key in targets:
                np.testing.assert_array_equal(part_targets[key], targets[key][rows])


@pytest.mark.parametrize("mode", ["sentence", "stream"])
def test_batches_are_reproducible_so_skipping_resumes_exactly(mode):
    assert_skipping_resumes_exactly(
        lambda seed: _dataset(mode=mode, batch_size=2, window=4, seed=seed))


def test_one_pass_stream_ends():
    batches = list(_dataset(mode="stream", batch_size=2, window=4, repeat=False))
    pairs = sum(len(s) + 1 for s in SENTENCES)
    assert 0 < len(batches) * 2 * 4 <= pairs


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="mode must be one of"):
        _dataset(mode="windows")
    with pytest.raises(ValueError, match="window must be a positive integer"):
        _dataset(mode="stream", window=0)
    with pytest.raises(ValueError, match="multiple of replicas"):
        _dataset(batch_size=3, replicas=2)
