"""The simple baselines (bench/baselines.py) compute what they say, on data made here."""

import numpy as np
import pytest

from bench.baselines import bag_of_words_logistic_regression, majority_class, most_frequent_tag


def test_majority_class_predicts_the_most_frequent_training_label():
    result = majority_class(["a", "b", "b"], ["b", "a", "b", "b"])
    assert result == {"metric": "accuracy", "score": 0.75, "label": "b"}


def test_logistic_regression_learns_a_lexical_rule_and_picks_its_l2_without_the_dev_set():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]

    def sample(n):
        texts, labels = [], []
        for _ in range(n):
            label = rng.integers(2)
            cue = "good" if label else "bad"
            texts.append(" ".join([cue, *rng.choice(words, 5)]))
            labels.append(["negative", "positive"][label])
        return texts, labels

    (train, train_y), (dev, dev_y) = sample(200), sample(100)
    result = bag_of_words_logistic_regression(train, train_y, dev, dev_y)
    assert result["score"] == 1.0 and result["features"] == 32
    cross_validated = result["cross_validated_by_l2"]
    assert str(result["l2"]) == max(cross_validated, key=cross_validated.get)
    # The dev labels play no part in the choice: with every dev label flipped, the same L2 and
    # the complementary score.
    flipped = bag_of_words_logistic_regression(
        train, train_y, dev, [{"negative": "positive", "positive": "negative"}[y]
                              for y in dev_y])
    assert flipped["l2"] == result["l2"] and flipped["score"] == 0.0
    # Noise words alone carry nothing: about chance.
    noise = bag_of_words_logistic_regression([t.split(" ", 1)[1] for t in train], train_y,
                                             [t.split(" ", 1)[1] for t in dev], dev_y)
    assert noise["score"] < 0.75


def test_most_frequent_tag_backs_off_by_class_and_suffix():
    train = [[("The", "DT"), ("dog", "NN"), ("runs", "VBZ"), ("quickly", "RB")],
             [("We", "PRP"), ("saw", "VBD"), ("Peter", "NNP"), ("at", "IN"), ("42", "CD")],
             [("the", "DT"), ("run", "NN"), ("run", "VB"), ("run", "NN")]]
    dev = [[("the", "DT"), ("run", "NN"), ("Mary", "NNP"), ("sleeps", "VBZ"),
            ("slowly", "RB"), ("1999", "CD"), ("xq", "NN")]]
    result = most_frequent_tag(train, dev)
    # run: NN (2 of 3); Mary: capitalised inside a sentence (NNP); sleeps: the suffix "s"
    # (VBZ); slowly: "ly" (RB); 1999: a number (CD); xq: nothing known, the most frequent (NN).
    assert result["score"] == 1.0
    assert result["unknown_tokens"] == pytest.approx(5 / 7)
    # "Mary" first in its sentence is not taken for a name: its suffix decides (y: RB).
    first = most_frequent_tag(train, [[("Mary", "NNP")]])
    assert first["score"] == 0.0
