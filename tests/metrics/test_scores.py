"""Task scores against independent NumPy references written from their definitions."""

import numpy as np
import pytest

from elmo_tf.metrics import scores

RNG = np.random.default_rng(0)


def _binary(n=200):
    gold = RNG.integers(0, 2, n)
    return gold, np.where(RNG.random(n) < 0.7, gold, 1 - gold)


def test_accuracy_and_f1_from_counts():
    gold, predicted = _binary()
    assert scores.accuracy(gold, predicted) == sum(g == p for g, p in zip(gold, predicted)) / 200
    tp = sum(1 for g, p in zip(gold, predicted) if g == 1 and p == 1)
    precision, recall = tp / sum(predicted == 1), tp / sum(gold == 1)
    assert scores.f1(gold, predicted) == pytest.approx(2 * precision * recall
                                                       / (precision + recall))
    assert scores.f1([0, 0], [0, 0]) == 0.0  # no positive anywhere


def test_matthews_correlation_is_the_binary_formula_and_the_one_hot_correlation():
    gold, predicted = _binary()
    tp = np.sum((gold == 1) & (predicted == 1))
    tn = np.sum((gold == 0) & (predicted == 0))
    fp = np.sum((gold == 0) & (predicted == 1))
    fn = np.sum((gold == 1) & (predicted == 0))
    binary = (tp * tn - fp * fn) / np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    assert scores.matthews_correlation(gold, predicted) == pytest.approx(binary)
    # Three classes: the covariance of the centred one-hot labels, summed over classes.
    gold = RNG.integers(0, 3, 300)
    predicted = np.where(RNG.random(300) < 0.6, gold, RNG.integers(0, 3, 300))
    x, y = np.eye(3)[gold], np.eye(3)[predicted]
    x, y = x - x.mean(0), y - y.mean(0)
    expected = (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum())
    assert scores.matthews_correlation(gold, predicted) == pytest.approx(expected)
    assert scores.matthews_correlation([1, 1, 0], [1, 1, 1]) == 0.0  # one predicted class


def test_pearson_and_spearman_with_ties():
    gold = RNG.normal(size=100)
    predicted = gold + RNG.normal(size=100)
    assert scores.pearson(gold, predicted) == pytest.approx(np.corrcoef(gold, predicted)[0, 1])
    # Scores with ties (STS-B's are often whole or half points): average ranks.
    gold = RNG.integers(0, 6, 100).astype(float)
    predicted = gold + RNG.integers(-1, 2, 100)

    def ranks(values):  # rank = values below + (values equal + 1) / 2
        return np.array([np.sum(values < v) + (np.sum(values == v) + 1) / 2 for v in values])

    expected = np.corrcoef(ranks(gold), ranks(predicted))[0, 1]
    assert scores.spearman(gold, predicted) == pytest.approx(expected)
    assert scores.pearson([1, 1, 1], [1, 2, 3]) == 0.0  # a constant side


@pytest.mark.parametrize("tags, chunks", [
    (["B-PER", "I-PER", "O", "B-LOC"], {(0, 2, "PER"), (3, 4, "LOC")}),
    (["I-PER", "I-PER", "I-LOC", "O", "I-ORG"], {(0, 2, "PER"), (2, 3, "LOC"), (4, 5, "ORG")}),
    (["B-PER", "B-PER", "I-PER"], {(0, 1, "PER"), (1, 3, "PER")}),          # IOB2
    (["S-PER", "B-LOC", "I-LOC", "E-LOC", "I-LOC"], {(0, 1, "PER"), (1, 4, "LOC"), (4, 5, "LOC")}),
    (["O", "O"], set()),
])
def test_chunks_are_read_as_conlleval_reads_them(tags, chunks):
    assert scores._chunks(tags, 0) == {(0, start, end, kind) for start, end, kind in chunks}


def test_span_f1_and_token_accuracy_over_sentences():
    gold = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "B-ORG", "I-ORG"]]
    predicted = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "B-ORG", "O"]]
    # Gold chunks: PER, LOC, ORG(2); predicted: PER, LOC, ORG(1): 2 of 3 right each way.
    assert scores.span_f1(gold, predicted) == pytest.approx(2 / 3)
    assert scores.token_accuracy(gold, predicted) == pytest.approx(6 / 7)
    with pytest.raises(ValueError, match="as many predicted tags as gold tags"):
        scores.span_f1(gold, [["O"], ["O"]])


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="two 1-D arrays of the same length"):
        scores.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="empty set"):
        scores.pearson([], [])
