"""The simple baselines a pre-trained biLM has to beat on a labelled task (`bench/pretraining_value.py`).

* `majority_class`: every example gets the training set's most frequent label.
* `bag_of_words_logistic_regression`: multinomial logistic regression on binary bag-of-words
  features (the training set's words, as the texts are tokenized), L2-regularised, 400 steps of
  full-batch Adam; the L2 weight is chosen from a small grid by 3-fold cross-validation on the
  training set, never on the dev set it is scored on (the neural probes keep their best dev
  epoch: if anything, the comparison favours them).
* `most_frequent_tag`: every token gets its most frequent training tag; an unknown token gets
  that of its class (a number; a capitalised word inside a sentence), else that of its longest
  known suffix of 1 to 4 characters, else the most frequent tag.

NumPy only (no scikit-learn here). Each returns `{"metric": ..., "score": ...}` and what it
chose.

Example:
>>> bag_of_words_logistic_regression(train_texts, train_labels, dev_texts, dev_labels)
{'metric': 'accuracy', 'score': 0.76, 'l2': 0.0001, ...}
"""

import collections

import numpy as np

L2_GRID = (0.0, 1e-4, 1e-3, 1e-2)


def majority_class(train_labels, dev_labels):
    label = collections.Counter(train_labels).most_common(1)[0][0]
    score = float(np.mean([y == label for y in dev_labels]))
    return {"metric": "accuracy", "score": score, "label": label}


def _features(texts, index):
    x = np.zeros((len(texts), len(index)), np.float32)
    for row, text in enumerate(texts):
        for word in text.split():
            column = index.get(word)
            if column is not None:
                x[row, column] = 1.0
    return x


def _fit(x, y, classes, l2, steps=400, learning_rate=0.05):
    """Weights `[features + 1, classes]` of the L2-regularised softmax regression (bias last,
    not regularised), by full-batch Adam."""
    x = np.hstack([x, np.ones((len(x), 1), np.float32)])
    w = np.zeros((x.shape[1], classes), np.float32)
    m, v = np.zeros_like(w), np.zeros_like(w)
    onehot = np.eye(classes, dtype=np.float32)[y]
    penalty = np.full((x.shape[1], 1), l2, np.float32)
    penalty[-1] = 0.0
    for t in range(1, steps + 1):
        logits = x @ w
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        grad = x.T @ (p - onehot) / len(x) + 2 * penalty * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad ** 2
        w -= learning_rate * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return w


def _accuracy(w, x, y):
    return float(np.mean((np.hstack([x, np.ones((len(x), 1), np.float32)]) @ w).argmax(1) == y))


def bag_of_words_logistic_regression(train_texts, train_labels, dev_texts, dev_labels,
                                     grid=L2_GRID, folds=3, seed=0, test_texts=None,
                                     test_labels=None):
    """The L2 weight chosen by cross-validation on the training set and scored on dev; or,
    with a test split, chosen on dev (as the probes choose their epoch) and scored on test."""
    if test_texts is not None:
        by_l2 = {l2: bag_of_words_logistic_regression(
            train_texts, train_labels, dev_texts, dev_labels, grid=(l2,))["score"]
            for l2 in grid}
        best = max(grid, key=lambda l2: by_l2[l2])
        chosen = bag_of_words_logistic_regression(train_texts, train_labels, test_texts,
                                                  test_labels, grid=(best,))
        return {"metric": "accuracy", "score": chosen["score"], "l2": best,
                "dev_score": by_l2[best], "dev_by_l2": {str(k): v for k, v in by_l2.items()},
                "features": chosen["features"]}
    labels = sorted(set(train_labels))
    label_id = {label: i for i, label in enumerate(labels)}
    index = {w: i for i, w in enumerate(sorted({w for t in train_texts for w in t.split()}))}
    x_train, x_dev = _features(train_texts, index), _features(dev_texts, index)
    y_train = np.array([label_id[y] for y in train_labels])
    y_dev = np.array([label_id.get(y, -1) for y in dev_labels])
    # The L2 weight by cross-validation on the training set (features from all of it: the
    # vocabulary carries no label).
    fold = np.random.default_rng(seed).permutation(len(y_train)) % folds
    cross_validated = {}
    for l2 in grid:
        cross_validated[l2] = float(np.mean([_accuracy(
            _fit(x_train[fold != k], y_train[fold != k], len(labels), l2),
            x_train[fold == k], y_train[fold == k]) for k in range(folds)]))
    best = max(grid, key=lambda l2: cross_validated[l2])
    w = _fit(x_train, y_train, len(labels), best)
    return {"metric": "accuracy", "score": _accuracy(w, x_dev, y_dev), "l2": best,
            "cross_validated_by_l2": {str(k): v for k, v in cross_validated.items()},
            "features": len(index)}


def most_frequent_tag(train_sentences, dev_sentences):
    """`train_sentences`, `dev_sentences`: lists of `[(token, tag), ...]`."""
    by_word = collections.defaultdict(collections.Counter)
    by_class = collections.defaultdict(collections.Counter)  # digits; capitalised inside
    by_suffix = collections.defaultdict(collections.Counter)
    overall = collections.Counter()
    for sentence in train_sentences:
        for position, (word, tag) in enumerate(sentence):
            by_word[word][tag] += 1
            by_class[_class(word, position)][tag] += 1
            for n in range(1, 5):
                by_suffix[word[-n:].lower()][tag] += 1
            overall[tag] += 1

    def tag(word, position):
        if word in by_word:
            return by_word[word].most_common(1)[0][0]
        word_class = _class(word, position)
        if word_class and word_class in by_class:
            return by_class[word_class].most_common(1)[0][0]
        for n in range(4, 0, -1):
            if word[-n:].lower() in by_suffix:
                return by_suffix[word[-n:].lower()].most_common(1)[0][0]
        return overall.most_common(1)[0][0]

    gold = [t for sentence in dev_sentences for _, t in sentence]
    predicted = [tag(w, i) for sentence in dev_sentences for i, (w, _) in enumerate(sentence)]
    unknown = [w not in by_word for sentence in dev_sentences for w, _ in sentence]
    right = np.array([g == p for g, p in zip(gold, predicted)])
    return {"metric": "token_accuracy", "score": float(right.mean()),
            "unknown_tokens": float(np.mean(unknown)),
            "accuracy_on_unknown": float(right[np.array(unknown)].mean()) if any(unknown)
            else None}


def _class(word, position):
    """`digits`, `capitalised` (not sentence-initial), or None."""
    if any(c.isdigit() for c in word) and not any(c.isalpha() for c in word):
        return "digits"
    if position > 0 and word[:1].isupper():
        return "capitalised"
    return None
