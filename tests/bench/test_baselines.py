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


def test_with_a_test_split_the_l2_is_chosen_on_dev_and_scored_on_test():
    """The probes' protocol (issue 38): a setting chosen on dev, the score of test. A dev set
    whose labels are flipped must choose the L2 weight that fits the training set worst."""
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(30)]

    def sample(n, flip=False):
        labels = rng.integers(2, size=n)
        texts = [" ".join(["good" if y else "bad", *rng.choice(words, 5)]) for y in labels]
        return texts, [["negative", "positive"][int(y) ^ flip] for y in labels]

    (train, train_y), (test, test_y) = sample(200), sample(100)
    grid = (0.0, 1e-1, 10.0)
    for flip in (False, True):
        dev, dev_y = sample(100, flip)
        result = bag_of_words_logistic_regression(train, train_y, dev, dev_y, grid=grid,
                                                  test_texts=test, test_labels=test_y)
        assert set(result["dev_by_l2"]) == {str(g) for g in grid}
        assert result["l2"] == max(grid, key=lambda g: result["dev_by_l2"][str(g)])
        assert result["dev_score"] == result["dev_by_l2"][str(result["l2"])]
        alone = bag_of_words_logistic_regression(train, train_y, test, test_y,
                                                 grid=(result["l2"],))
        assert result["score"] == alone["score"]
    assert result["l2"] == 10.0 and result["score"] < 1.0  # the flipped dev chose the worst


def test_the_probe_splits_are_consecutive_and_move_unknown_tags_to_training():
    from bench.real_text import _cut, _known_tags_only

    assert _cut(list(range(10)), (6, 2)) == [[0, 1, 2, 3, 4, 5], [6, 7], [8, 9]]
    train, dev, test = _known_tags_only([[[("a", "X")]], [[("b", "X")], [("c", "LS")]],
                                         [[("d", "SYM")], [("e", "X")]]])
    assert train == [[("a", "X")], [("c", "LS")], [("d", "SYM")]]
    assert (dev, test) == ([[("b", "X")]], [[("e", "X")]])
