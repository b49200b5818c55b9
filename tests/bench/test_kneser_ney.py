"""The Kneser-Ney baseline of the real-text benchmark: a proper distribution, Chen & Goodman's
discounts, continuation counts, and cross-entropy close to a known source's entropy."""

import math

import numpy as np
import pytest

from bench.kneser_ney import BOS, EOS, UNK, KneserNey, _discounts


def _zipf_sentences(rng, n, words=30, order_bias=True):
    vocabulary = [f"w{i}" for i in range(words)]
    p = 1.0 / np.arange(1, words + 1)
    p /= p.sum()
    sentences = []
    for _ in range(n):
        length = int(rng.integers(1, 9))
        sentence = list(rng.choice(vocabulary, size=length, p=p))
        if order_bias and length > 1:
            sentence[1] = "after_" + sentence[0]  # a deterministic successor: longer n-grams help
        sentences.append(sentence)
    return sentences


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_every_context_gives_a_distribution_over_the_vocabulary(order):
    rng = np.random.default_rng(order)
    sentences = _zipf_sentences(rng, 400)
    vocabulary = sorted({w for s in sentences for w in s})[:-5]  # some words become <UNK>
    model = KneserNey(order).fit(sentences, vocabulary)
    assert BOS not in model.words and {EOS, UNK} <= set(model.words)
    contexts = [(), (BOS,), (BOS, "w0"), ("w0", "after_w0", "w1", "w2"),
                ("never", "seen", "words"), (BOS, "w3", "after_w3")]
    contexts += [tuple([BOS] + s[:k]) for s in sentences[:20] for k in range(len(s))]
    for context in contexts:
        total = sum(model.probability(w, context) for w in model.words)
        assert total == pytest.approx(1.0, abs=1e-9), context
        assert all(model.probability(w, context) > 0 for w in model.words)


def test_discounts_follow_chen_and_goodman():
    # t1..t4 = 10, 5, 3, 2: Y = 10 / (10 + 2 * 5) = 0.5
    counts = [1] * 10 + [2] * 5 + [3] * 3 + [4] * 2 + [9] * 7
    assert _discounts(counts) == pytest.approx(
        [0.0, 1 - 2 * 0.5 * 5 / 10, 2 - 3 * 0.5 * 3 / 5, 3 - 4 * 0.5 * 2 / 3])


def test_lower_orders_count_contexts_not_occurrences():
    # "francisco" is frequent but follows one word only; "glasses" is rarer but follows many:
    # in a context seen with neither, Kneser-Ney prefers "glasses" (unlike frequency).
    sentences = [["san", "francisco"]] * 30 + [[w, "glasses"] for w in
                                               ("red", "blue", "new", "old", "my", "his")]
    sentences += [["the", w] for w in ("red", "blue", "new", "old", "my", "his", "san")]
    model = KneserNey(2).fit(sentences, {w for s in sentences for w in s})
    assert model.probability("glasses", ("the",)) > model.probability("francisco", ("the",))
    # In the context it follows, "francisco" is near certain.
    assert model.probability("francisco", ("san",)) > 0.9


def test_cross_entropy_approaches_the_sources_entropy():
    # A first-order Markov source with known transition probabilities: the bigram model's
    # held-out cross-entropy must come close to the source's conditional entropy.
    rng = np.random.default_rng(0)
    words = [f"v{i}" for i in range(8)] + [EOS]
    transitions = rng.dirichlet(np.full(len(words), 0.5), size=len(words))  # row 8: from <S>

    def sample(n):
        out, logp = [], 0.0
        for _ in range(n):
            sentence, state = [], len(words) - 1
            while True:
                k = int(rng.choice(len(words), p=transitions[state]))
                logp += math.log(transitions[state][k])
                if words[k] == EOS:
                    break
                sentence.append(words[k])
                state = k
            out.append(sentence)
        return out, logp

    train, _ = sample(20_000)
    heldout, logp = sample(2_000)
    model = KneserNey(2).fit(train, words[:-1])
    tokens = sum(len(s) + 1 for s in heldout)
    true_entropy = -logp / tokens
    assert math.log(model.perplexity(heldout)) == pytest.approx(true_entropy, rel=0.01)
