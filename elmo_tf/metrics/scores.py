"""Task scores as GLUE and CoNLL define them, computed in NumPy on a whole evaluation set:
accuracy, binary F1, Matthews correlation, Pearson and Spearman correlations, token accuracy
and chunk (span) F1.

Each takes the gold values first and the predictions second, as arrays (or lists) of the same
length, and returns a Python float. An empty set is a `ValueError`; a score that is undefined
for the data (a correlation with a constant side, an F1 with nothing positive anywhere) is 0.0,
as scikit-learn and the GLUE evaluation return it.
"""

import numpy as np


def _pair(gold, predicted, name):
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    if gold.shape != predicted.shape or gold.ndim != 1:
        raise ValueError(f"{name} takes two 1-D arrays of the same length; got shapes "
                         f"{gold.shape} and {predicted.shape}.")
    if gold.size == 0:
        raise ValueError(f"{name} of an empty set is undefined.")
    return gold, predicted


def accuracy(gold, predicted):
    """The fraction of predictions equal to the gold label.

    Example:
    >>> accuracy([1, 0, 1, 1], [1, 1, 1, 0])
    0.5
    """
    gold, predicted = _pair(gold, predicted, "accuracy")
    return float(np.mean(gold == predicted))


def f1(gold, predicted, positive=1):
    """F1 of the `positive` class (GLUE's F1 for MRPC and QQP: label 1).

    Example:
    >>> f1([1, 0, 1, 1], [1, 1, 1, 0])   # precision 2/3, recall 2/3
    0.6666666666666666
    """
    gold, predicted = _pair(gold, predicted, "f1")
    true_positives = np.sum((gold == positive) & (predicted == positive))
    denominator = np.sum(gold == positive) + np.sum(predicted == positive)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_correlation(gold, predicted):
    """Matthews correlation coefficient of two binary (or multi-class) labelings (GLUE's CoLA
    metric): Pearson's correlation of the one-hot labels, in [-1, 1], 0 by convention when
    either side has a single class.

    Example:
    >>> matthews_correlation([1, 1, 0, 0], [1, 0, 0, 0])
    0.5773502691896258
    """
    gold, predicted = _pair(gold, predicted, "matthews_correlation")
    classes = np.union1d(gold, predicted)
    # Gorodkin's multi-class form, from the confusion matrix C: (c*s - t.p) /
    # sqrt((s^2 - p.p)(s^2 - t.t)), t and p the true and predicted class counts.
    confusion = np.zeros((classes.size, classes.size))
    np.add.at(confusion, (np.searchsorted(classes, gold), np.searchsorted(classes, predicted)),
              1)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator else 0.0


def pearson(gold, predicted):
    """Pearson's correlation coefficient (GLUE's STS-B metric, with `spearman`).

    Example:
    >>> pearson([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    0.9933992677987828
    """
    gold, predicted = _pair(gold, predicted, "pearson")
    x, y = gold.astype(np.float64), predicted.astype(np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denominator) if denominator else 0.0


def spearman(gold, predicted):
    """Spearman's rank correlation: Pearson's on the ranks, tied values sharing their mean
    rank.

    Example:
    >>> spearman([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    1.0
    """
    gold, predicted = _pair(gold, predicted, "spearman")
    return pearson(_ranks(gold), _ranks(predicted))


def _ranks(values):
    """1-based ranks, ties averaged."""
    values = values.astype(np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size)
    ranks[order] = np.arange(1, values.size + 1)
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    for start, count in zip(first, counts):
        if count > 1:
            ranks[order[start:start + count]] = start + (count + 1) / 2
    return ranks


def token_accuracy(gold_tags, predicted_tags):
    """The fraction of tokens tagged right, over sentences of any lengths (each a list of
    tags; padding is not a token, so it is never counted).

    Example:
    >>> token_accuracy([["B-PER", "O"], ["O"]], [["B-PER", "B-LOC"], ["O"]])
    0.6666666666666666
    """
    gold, predicted = _tag_pairs(gold_tags, predicted_tags, "token_accuracy")
    return accuracy(gold, predicted)


def span_f1(gold_tags, predicted_tags):
    """Micro-averaged F1 of chunks (spans), as CoNLL's conlleval scores NER and chunking: a
    predicted chunk counts when its type and both ends match a gold chunk. Tags are IOB1/IOB2
    (`B-TYPE`, `I-TYPE`, `O`; an `I-` after another type or after `O` starts a chunk, as
    conlleval reads it) or IOBES (`S-`, `E-` too).

    Example:
    >>> span_f1([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-ORG"]])
    0.5
    """
    _tag_pairs(gold_tags, predicted_tags, "span_f1")
    gold = set().union(*(_chunks(tags, i) for i, tags in enumerate(gold_tags)))
    predicted = set().union(*(_chunks(tags, i) for i, tags in enumerate(predicted_tags)))
    denominator = len(gold) + len(predicted)
    return 2 * len(gold & predicted) / denominator if denominator else 0.0


def _tag_pairs(gold_tags, predicted_tags, name):
    if len(gold_tags) != len(predicted_tags) or any(
            len(g) != len(p) for g, p in zip(gold_tags, predicted_tags)):
        raise ValueError(f"{name} takes the same number of sentences, each with as many "
                         "predicted tags as gold tags.")
    gold = [t for tags in gold_tags for t in tags]
    predicted = [t for tags in predicted_tags for t in tags]
    if not gold:
        raise ValueError(f"{name} of an empty set is undefined.")
    return np.asarray(gold, object), np.asarray(predicted, object)


def _chunks(tags, sentence):
    """{(sentence, start, end, type)} of one sentence's tags (end exclusive)."""
    found, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, tag_type = str(tag).partition("-")
        ends_before = start is not None and (
            prefix in ("O", "B", "S") or tag_type != kind or prefix not in ("I", "E"))
        if ends_before:
            found.add((sentence, start, i, kind))
            start = None
        if prefix in ("B", "S") or (prefix in ("I", "E") and start is None):
            start, kind = i, tag_type
        if prefix in ("S", "E") and start is not None:
            found.add((sentence, start, i + 1, kind))
            start = None
    return found
