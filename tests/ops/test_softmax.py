"""The XLA-compilable sampled softmax against TensorFlow's own sampler and loss, and NumPy."""

import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.ops.softmax import (
    full_softmax_nll,
    log_uniform_candidates,
    log_uniform_probabilities,
    sampled_softmax_nll,
)

V, K = 60, 12


def _ours(seed, true_ids=(0,), num_sampled=K, range_max=V):
    sampled, true_expected, sampled_expected = log_uniform_candidates(
        tf.constant(true_ids, tf.int32), num_sampled, range_max, tf.constant(seed, tf.int32))
    return sampled.numpy(), true_expected.numpy(), sampled_expected.numpy()


def _tfs(seed, true_ids=(0,), num_sampled=K, range_max=V):
    sampled, true_expected, sampled_expected = tf.random.log_uniform_candidate_sampler(
        tf.constant(np.asarray(true_ids)[:, None], tf.int64), num_true=1,
        num_sampled=num_sampled, unique=True, range_max=range_max, seed=seed)
    return sampled.numpy(), true_expected.numpy()[:, 0], sampled_expected.numpy()


def _tries(sampled, sampled_expected, num_sampled=K, range_max=V):
    """The number of draws a sampled set took, read back from TF's expected-count formula
    `-expm1(tries * log1p(-p))` (or `p * K` when there was no repeat)."""
    p = log_uniform_probabilities(sampled, range_max).numpy()
    if np.allclose(sampled_expected, p * num_sampled, rtol=1e-6):
        return num_sampled
    return float(np.median(np.log1p(-sampled_expected.astype(np.float64)) / np.log1p(-p)))


def _expected(ids, tries, num_sampled=K, range_max=V):
    """TF's expected count of `ids` in a set that took `tries` draws."""
    p = log_uniform_probabilities(ids, range_max).numpy()
    return p * num_sampled if tries == num_sampled else -np.expm1(tries * np.log1p(-p))


def test_candidates_are_distinct_in_range_and_follow_the_seed():
    sampled, _, _ = _ours([3, 4])
    assert len(set(sampled.tolist())) == K and sampled.min() >= 0 and sampled.max() < V
    np.testing.assert_array_equal(_ours([3, 4])[0], sampled)
    assert not np.array_equal(_ours([3, 5])[0], sampled)
    everything, _, expected = _ours([1, 1], num_sampled=V)  # every id, in some order
    assert sorted(everything.tolist()) == list(range(V)) and np.all(expected <= 1.0 + 1e-6)
    with pytest.raises(ValueError, match="num_sampled"):
        _ours([1, 1], num_sampled=V + 1)


def test_candidate_sets_and_draw_counts_are_distributed_as_tfs_sampler():
    """TF's `LogUniformCandidateSampler(unique=True)` is the reference: over many draws, each
    id is in the set as often, and a set takes as many draws, as with ours."""
    draws = 400
    ours = [_ours([7, i]) for i in range(draws)]
    tfs = [_tfs(1000 + i) for i in range(draws)]
    for name, runs in (("ours", ours), ("tf", tfs)):
        # Expected counts are the formula of the draws the set took (the same `tries` for
        # every id of a set).
        for sampled, _, expected in runs[:20]:
            np.testing.assert_allclose(expected, _expected(sampled, _tries(sampled, expected)),
                                       rtol=1e-4, err_msg=name)
    inclusion = [np.bincount(np.concatenate([r[0] for r in runs]), minlength=V) / draws
                 for runs in (ours, tfs)]
    spread = np.sqrt(2 * inclusion[1] * (1 - inclusion[1]) / draws) + 1e-3
    assert np.all(np.abs(inclusion[0] - inclusion[1]) < 5 * spread), (inclusion, spread)
    assert inclusion[0][0] > 0.9 and inclusion[0][V - 1] < 0.2  # log-uniform, not uniform
    tries = [np.array([_tries(s, e) for s, _, e in runs]) for runs in (ours, tfs)]
    spread = np.sqrt((tries[0].var() + tries[1].var()) / draws)
    assert abs(tries[0].mean() - tries[1].mean()) < 5 * spread, (tries[0].mean(),
                                                                  tries[1].mean())
    assert tries[0].mean() > K  # repeats happen and are counted


def test_expected_counts_of_true_ids_use_the_same_draw_count():
    true_ids = np.array([0, 5, 59])
    sampled, true_expected, sampled_expected = _ours([2, 9], true_ids=true_ids)
    tries = _tries(sampled, sampled_expected)
    assert tries > K
    np.testing.assert_allclose(true_expected, _expected(true_ids, tries), rtol=1e-5)
    # One candidate takes one draw: the expected count is p itself, as in TF.
    _, true_expected, _ = _ours([2, 9], true_ids=true_ids, num_sampled=1)
    np.testing.assert_allclose(true_expected, log_uniform_probabilities(true_ids, V), rtol=1e-6)


def _case(seed=0, n=40, dim=5):
    rng = np.random.default_rng(seed)
    kernel = rng.normal(size=(V, dim)).astype(np.float32)
    bias = (-np.log(np.arange(1, V + 1)) + rng.normal(size=V) * 0.1).astype(np.float32)
    outputs = rng.normal(size=(n, dim)).astype(np.float32)
    ranks = np.arange(1, V + 1)
    targets = rng.choice(V, size=n, p=(1 / ranks) / (1 / ranks).sum()).astype(np.int32)
    return kernel, bias, outputs, targets


def test_nll_is_tfs_sampled_softmax_loss_with_the_same_candidates():
    kernel, bias, outputs, targets = _case()
    seed = tf.constant([5, 6])
    nll = sampled_softmax_nll(tf.constant(kernel), tf.constant(bias), tf.constant(outputs),
                              tf.constant(targets), K, seed).numpy()
    sampled, true_expected, sampled_expected = log_uniform_candidates(
        tf.constant(targets), K, V, seed)
    hits = np.isin(targets, sampled.numpy())
    assert 0 < hits.sum() < len(targets)  # accidental hits to remove, and rows without
    reference = tf.nn.sampled_softmax_loss(
        kernel, bias, tf.constant(targets[:, None], tf.int64), outputs, num_sampled=K,
        num_classes=V, sampled_values=(tf.cast(sampled, tf.int64), true_expected[:, None],
                                       sampled_expected)).numpy()
    np.testing.assert_allclose(nll, reference, rtol=1e-5, atol=1e-5)

    # And from the formula: logits minus log expected counts, a row's own id left out.
    s, et, es = (np.asarray(v, np.float64) for v in (sampled, true_expected, sampled_expected))
    s = s.astype(int)
    true_logit = (outputs * kernel[targets]).sum(1) + bias[targets] - np.log(et)
    logits = outputs.astype(np.float64) @ kernel[s].T + bias[s] - np.log(es)
    logits[targets[:, None] == s[None, :]] = -np.inf
    all_logits = np.concatenate([true_logit[:, None], logits], 1)
    expected = np.log(np.exp(all_logits - all_logits.max(1, keepdims=True)).sum(1)) \
        + all_logits.max(1) - true_logit
    np.testing.assert_allclose(nll, expected, rtol=1e-5, atol=1e-5)


def test_the_kernel_gradient_stays_row_sparse():
    kernel, bias, outputs, targets = _case()
    kernel = tf.Variable(kernel)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(sampled_softmax_nll(kernel, tf.constant(bias), outputs, targets, K,
                                                 tf.constant([1, 2])))
    gradient = tape.gradient(loss, kernel)
    assert isinstance(gradient, tf.IndexedSlices)
    assert gradient.values.shape[0] == len(targets) + K


def test_compiles_with_xla_and_draws_the_same_there():
    kernel, bias, outputs, targets = _case()
    seed = tf.constant([3, 4])
    args = (tf.constant(kernel), tf.constant(bias), tf.constant(outputs), tf.constant(targets))

    def nlls(kernel, bias, outputs, targets):
        return (sampled_softmax_nll(kernel, bias, outputs, targets, K, seed),
                full_softmax_nll(kernel, bias, outputs, targets))

    eager = nlls(*args)
    compiled = tf.function(nlls, jit_compile=True)(*args)
    for got, want in zip(compiled, eager):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_full_softmax_nll_against_numpy():
    kernel, bias, outputs, targets = _case(n=7)
    logits = outputs.astype(np.float64) @ kernel.T + bias
    expected = np.log(np.exp(logits).sum(1)) - logits[np.arange(7), targets]
    np.testing.assert_allclose(full_softmax_nll(kernel, bias, outputs, targets), expected,
                               rtol=1e-5)


def test_full_softmax_chunks_agree_with_one_matmul(monkeypatch):
    from elmo_tf.ops import softmax

    kernel, bias, outputs, targets = _case(n=37)
    whole = full_softmax_nll(kernel, bias, outputs, targets)
    monkeypatch.setattr(softmax, "MAX_LOGITS_PER_CHUNK", V * 5)  # 5 rows a chunk
    np.testing.assert_allclose(full_softmax_nll(kernel, bias, outputs, targets), whole, rtol=1e-6)
