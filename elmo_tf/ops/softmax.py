"""The language models' softmax losses: a log-uniform candidate sampler, the sampled softmax's
NLL with accidental hits removed, and the full softmax's NLL, all compilable with XLA.

bilm-tf trained with `tf.nn.sampled_softmax_loss`, whose `LogUniformCandidateSampler` has no
XLA kernel (Keras compiles `fit` with XLA on a GPU by default). The functions here compute
the same estimator with ops XLA compiles (static shapes, no `tf.unique`, no boolean masks):

* `log_uniform_candidates` draws as TF's sampler with `unique=True` does: log-uniform draws
  `floor(exp(u * log(V + 1))) - 1` with replacement, repeats rejected, until `num_sampled`
  distinct ids are found; its expected counts are TF's: `-expm1(tries * log1p(-p))` from the
  number of draws `tries` that took, or `p * num_sampled` when there was no repeat.
* `sampled_softmax_nll` is `tf.nn.sampled_softmax_loss` given those candidates
  (`remove_accidental_hits=True`, logits minus log expected counts), with the kernel rows
  gathered in one lookup so that its gradient stays row-sparse (`tf.IndexedSlices`).
"""

import math

import tensorflow as tf

from elmo_tf.ops.random import stateless_uniform

from elmo_tf.ops.chunking import map_in_chunks, map_leading_rows

# The full softmax's logits are computed this many entries at a time at most (256 MB in float32).
MAX_LOGITS_PER_CHUNK = 1 << 26
# With `count`, the rows are scored in this many equal chunks, as many as the first `count`
# rows fill (`map_leading_rows`): at most an eighth of the rows scored beyond `count`.
LEADING_ROW_CHUNKS = 8


def log_uniform_probabilities(ids, range_max):
    """P(id) under the log-uniform (Zipfian) distribution over `[0, range_max)`, float64:
    `log((id + 2) / (id + 1)) / log(range_max + 1)`."""
    ids = tf.cast(ids, tf.float64)
    return tf.math.log((ids + 2.0) / (ids + 1.0)) / math.log(range_max + 1.0)


def log_uniform_candidates(true_ids, num_sampled, range_max, seed):
    """`num_sampled` distinct log-uniform candidates and the expected counts of TF's sampler.

    Draws as `tf.random.log_uniform_candidate_sampler(..., unique=True)` does (the same
    distribution of candidate sets and of the number of draws), in rounds of `num_sampled`
    draws with static shapes, so it compiles with XLA.

    Args:
        true_ids: int `[n]` target ids (only their expected counts are computed).
        num_sampled: K, the number of distinct candidates, at most `range_max`.
        range_max: V, ids are in `[0, V)`.
        seed: int32 `[2]`, the stateless seed of the draws.

    Returns:
        (sampled int32 `[K]` in draw order, true_expected float32 `[n]`, sampled_expected
        float32 `[K]`).

    Example:
    >>> sampled, true_expected, sampled_expected = log_uniform_candidates(
    ...     tf.constant([3, 7]), num_sampled=4, range_max=10, seed=tf.constant([1, 2]))
    """
    if not 1 <= num_sampled <= range_max:
        raise ValueError(f"num_sampled must be in [1, range_max={range_max}]; got {num_sampled}.")
    k, v = int(num_sampled), int(range_max)
    log_range = math.log(v + 1.0)
    positions = tf.range(k)
    seed = tf.cast(seed, tf.int32)

    def draw_round(round_, count, tries, sampled, taken):
        # The same uniforms with or without XLA: a run draws the same candidates either way.
        u = stateless_uniform([k], seed + tf.stack([0, round_]))
        ids = tf.clip_by_value(tf.cast(tf.floor(tf.exp(u * log_range)), tf.int32) - 1, 0, v - 1)
        # A draw is new if its id was not taken before this round and it is the id's first
        # draw in this round.
        first = tf.math.unsorted_segment_min(positions, ids, v)
        new = tf.logical_and(tf.equal(tf.gather(first, ids), positions),
                             tf.equal(tf.gather(taken, ids), 0))
        new_count = tf.cast(new, tf.int32)
        rank = count + tf.cumsum(new_count) - 1
        keep = tf.logical_and(new, rank < k)
        sampled = tf.tensor_scatter_nd_update(  # slot k collects the draws not kept
            sampled, tf.where(keep, rank, k)[:, None], ids)
        taken = tf.tensor_scatter_nd_max(taken, ids[:, None], new_count)
        total = count + tf.reduce_sum(new_count)
        # Draws needed: all of this round's, or up to the one that found the K-th id.
        last = tf.argmax(tf.cast(tf.logical_and(new, tf.equal(rank, k - 1)), tf.int32),
                         output_type=tf.int32)
        tries += tf.where(total >= k, last + 1, k)
        return round_ + 1, tf.minimum(total, k), tries, sampled, taken

    _, _, tries, sampled, _ = tf.while_loop(
        lambda round_, count, *_: count < k, draw_round,
        (tf.constant(1), tf.constant(0), tf.constant(0), tf.zeros([k + 1], tf.int32),
         tf.zeros([v], tf.int32)))
    sampled = sampled[:k]

    def expected(ids):
        p = log_uniform_probabilities(ids, v)
        counts = tf.where(tf.equal(tries, k), p * k,
                          -tf.math.expm1(tf.cast(tries, tf.float64) * tf.math.log1p(-p)))
        return tf.cast(counts, tf.float32)

    return (tf.stop_gradient(sampled), tf.stop_gradient(expected(true_ids)),
            tf.stop_gradient(expected(sampled)))


def sampled_softmax_nll(kernel, bias, outputs, targets, num_sampled, seed, columns=None,
                        count=None):
    """Per-row NLL of the sampled softmax, as `tf.nn.sampled_softmax_loss` computes it.

    One set of `num_sampled` log-uniform candidates serves every row; logits are corrected by
    the log expected counts, and a candidate equal to a row's target is removed from that row.

    Args:
        kernel: `[V, P]` softmax weights (rows sorted by decreasing word frequency).
        bias: `[V]`.
        outputs: float32 `[n, P]`.
        targets: int `[n]` in `[0, V)`.
        num_sampled: candidates per call.
        seed: int32 `[2]` for `log_uniform_candidates`.
        columns: `(start, stop)`: the kernel's columns the rows are scored against (`outputs`
            `[n, stop - start]`); all of them when None.
        count: int32 scalar: only the first `count` rows need a score (static shapes: those
            rows' chunks are scored, `map_leading_rows`, and the other rows' NLLs are 0);
            every row when None.

    Returns:
        float32 `[n]`.
    """
    targets = tf.cast(targets, tf.int32)
    sampled, true_expected, sampled_expected = log_uniform_candidates(
        targets, num_sampled, kernel.shape[0], seed)
    n = tf.shape(targets)[0]
    ids = tf.concat([targets, sampled], 0)
    # One lookup of both: the kernel's gradient is one IndexedSlices, as in TF's loss.
    weights = tf.gather(kernel, ids)
    if columns is not None:  # sliced after the lookup: the gradient stays row-sparse
        weights = weights[:, columns[0]:columns[1]]
    biases = tf.gather(bias, ids)
    # The candidates' part, once: `nll` may run per chunk of rows (`count`).
    sampled_weights, sampled_biases = weights[n:], biases[n:] - tf.math.log(sampled_expected)

    def nll(rows):
        row_outputs, true_weights, true_biases, row_targets = rows
        true_logits = tf.reduce_sum(row_outputs * true_weights, axis=1) + true_biases
        sampled_logits = (tf.matmul(row_outputs, sampled_weights, transpose_b=True)
                          + sampled_biases)
        hits = tf.equal(row_targets[:, None], sampled[None, :])
        # TF adds -FLT_MAX to an accidental hit's logit; its softmax weight is exactly 0 either
        # way.
        sampled_logits = tf.where(hits, tf.float32.min, sampled_logits)
        logits = tf.concat([true_logits[:, None], sampled_logits], 1)
        return tf.reduce_logsumexp(logits, axis=1) - true_logits

    rows = (outputs, weights[:n], biases[:n] - tf.math.log(true_expected), targets)
    return nll(rows) if count is None else map_leading_rows(nll, rows, count,
                                                            LEADING_ROW_CHUNKS)


def full_softmax_nll(kernel, bias, outputs, targets, columns=None, count=None):
    """Per-row NLL of the full softmax; `outputs` `[n, P]`, `targets` int `[n]` (`columns`:
    `(start, stop)`, the kernel's columns the rows are scored against, and `count`, the
    leading rows that need a score, as in `sampled_softmax_nll`).

    Logits are computed a bounded number of rows at a time (`MAX_LOGITS_PER_CHUNK` entries), so
    a released-size vocabulary (793k words) does not need `n x V` floats at once.
    """
    if columns is not None:
        kernel = kernel[:, columns[0]:columns[1]]

    def nll(rows):
        h, t = rows[:, :-1], tf.cast(rows[:, -1], tf.int32)
        logits = tf.matmul(h, kernel, transpose_b=True) + bias
        return tf.nn.sparse_softmax_cross_entropy_with_logits(t, logits)

    rows = tf.concat([outputs, tf.cast(targets, tf.float32)[:, None]], 1)  # ids < 2**24
    max_rows = max(1, MAX_LOGITS_PER_CHUNK // kernel.shape[0])

    def bounded(chunk):
        return map_in_chunks(nll, chunk, max_rows, tf.TensorSpec([None], tf.float32))

    return bounded(rows) if count is None else map_leading_rows(bounded, rows, count,
                                                                LEADING_ROW_CHUNKS)
