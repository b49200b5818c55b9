"""ELECTRA's replaced-token detection on Masked ELMo (`replaced_token_weight`): the generator's
draws, the discriminator's input and labels, and the loss against a NumPy reference; no
original token at a replaced position; fit from a recipe, with and without XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import tokens_to_char_ids
from elmo_tf.layers.word_softmax import WordSoftmax
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone
from elmo_tf.models.masked_elmo.masked_elmo_language_model import MaskedElmoLanguageModel
from elmo_tf.recipes.recipe import Recipe
from elmo_tf.text.char_ids import MASK_CHAR, special_token_char_ids
from elmo_tf.training.pretraining import build_language_model
from tests import reference

WORDS = ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(17)]  # 20 words: a full softmax


def _softmax(vocabulary_size, num_negatives, width=6):
    softmax = WordSoftmax(vocabulary_size, num_negatives)
    softmax.build((None, width))
    softmax.kernel.assign(tf.random.stateless_normal(softmax.kernel.shape, [1, 2]))
    softmax.bias.assign(tf.random.stateless_normal(softmax.bias.shape, [3, 4]))
    return softmax


@pytest.mark.parametrize("training", [False, True])
def test_draws_follow_the_full_softmax_whatever_the_loss_estimates(training):
    """The NLL is `call`'s (the sampled estimate in training: 12 words, 4 candidates) and the
    words' frequencies are the full softmax's probabilities, the rarest word's too (a draw from
    the sampled softmax's target and candidates would favour the target); words not drawable
    never come."""
    softmax = _softmax(12, 4)
    row = tf.random.stateless_normal([1, 6], [5, 6])
    rows, targets = tf.repeat(row, 20_000, 0), tf.fill([20_000], 11)
    seed = tf.constant([7, 8])
    nll, words = softmax.nll_and_samples(rows, targets, training=training, seed=seed)
    np.testing.assert_allclose(nll.numpy(), softmax(rows, targets, training=training,
                                                    seed=seed).numpy(), rtol=1e-6)
    logits = (row.numpy() @ softmax.kernel.numpy().T + softmax.bias.numpy())[0]
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    frequencies = np.bincount(words.numpy(), minlength=12) / 20_000
    np.testing.assert_allclose(frequencies, probabilities, atol=0.015)
    drawable = tf.constant([False] * 3 + [True] * 9)
    _, words = softmax.nll_and_samples(rows, targets, training=training, seed=seed,
                                       drawable=drawable)
    assert words.numpy().min() >= 3
    again = softmax.draw(rows[:5], seed)  # a seed fixes the draws
    np.testing.assert_array_equal(again.numpy(), softmax.draw(rows[:5], seed).numpy())


def _model(weight=50.0, cloze_weight=0.0):
    keras.utils.set_random_seed(0)
    backbone = MaskedElmoBackbone.from_architecture("tiny_masked")
    model = MaskedElmoLanguageModel(backbone, len(WORDS), num_negatives=64,
                                    replaced_token_weight=weight, cloze_weight=cloze_weight)
    model.set_vocabulary(WORDS)
    return model


@pytest.mark.parametrize("xla", [False, True])
def test_the_loss_against_numpy_with_the_drawn_words_in_place(xla):
    """A generator that draws one word (its bias far above the others'): the discriminator
    reads the sentences with that word at every selected position (char ids from the word
    itself), the labels say replaced wherever it differs from the original, and the loss is the
    generator's masked-LM mean NLL + weight x the mean binary cross-entropy over every token +
    the cloze weight x the cloze mean NLL on the discriminator's first layer."""
    weight, cloze_weight, drawn = 50.0, 0.5, 7
    model = _model(weight, cloze_weight)
    model.xla = xla  # the branch compiled steps take: the selected rows sorted first
    bias = np.zeros(len(WORDS), np.float32)
    bias[drawn] = 60.0
    model.softmax.bias.assign(bias)
    sentences = [["w0", "w1", "w2", "w3"], ["w4", "w5", "w6", ""]]
    originals = np.array([[3, 4, 5, 6], [7, 8, 9, -1]], np.int32)
    targets = np.array([[-1, 4, -1, 6], [7, -1, -1, -1]], np.int32)  # (1, 0) is w4 = word 7
    masked = [row[:] for row in sentences]
    for r, c in zip(*np.nonzero(targets >= 0)):
        masked[r][c] = "MASK"
    char_ids = tokens_to_char_ids(masked).numpy()
    char_ids[targets >= 0] = special_token_char_ids(MASK_CHAR, char_ids.shape[-1])
    x = {"char_ids": tf.constant(char_ids)}
    y = {"targets": targets, "cloze_targets": originals}
    y_pred = model(x, training=True)
    loss = float(model.compute_loss(x=x, y=y, y_pred=y_pred, training=True))

    kernel, bias = model.softmax.kernel.numpy(), model.softmax.bias.numpy()

    def nll(outputs, ids):
        return reference.softmax_nll(outputs, ids, kernel, bias)

    generator = nll(y_pred["generator"].numpy(), targets).mean()
    replaced_sentences = [[WORDS[drawn] if targets[r, c] >= 0 else token
                           for c, token in enumerate(row)] for r, row in enumerate(sentences)]
    outputs = model.backbone(tokens_to_char_ids(replaced_sentences))
    top = outputs["layers"][:, -1].numpy()
    head_kernel, head_bias = (w.numpy() for w in model.replaced_token_head.weights)
    logits = (top @ head_kernel + head_bias)[..., 0]
    labels = ((targets >= 0) & (originals != drawn)).astype(np.float32)
    assert labels.tolist() == [[0, 1, 0, 1], [0, 0, 0, 0]]
    bce = np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))
    detection = bce[originals >= 0].mean()
    first = outputs["layers_with_boundaries"][:, 1].numpy()
    half = first.shape[-1] // 2
    rows = np.concatenate([first[:, :-2, :half], first[:, 2:, half:]], -1)
    cloze = nll(rows, originals).mean()
    assert loss == pytest.approx(generator + weight * detection + cloze_weight * cloze,
                                 rel=1e-5)
    accuracy = ((logits > 0) == labels.astype(bool))[originals >= 0].mean()
    assert float(model.replaced_token_accuracy.result()) == pytest.approx(accuracy)
    # In evaluation the loss is the generator's masked LM alone.
    assert float(model.compute_loss(x=x, y=y, y_pred=model(x), training=False)) == \
        pytest.approx(generator, rel=1e-5)


def test_a_token_is_labelled_replaced_exactly_where_the_discriminator_reads_another_word(
        monkeypatch):
    """Whatever the generator draws: the discriminator reads, at every selected position, a
    drawn word that is not a special token (out-of-vocabulary originals included), every other
    position as it is, and the loss's label is "replaced" exactly where the word it reads is
    not the original."""
    model = _model()
    captured = {}
    call = MaskedElmoBackbone.__call__
    loss = tf.nn.sigmoid_cross_entropy_with_logits

    def read(self, char_ids, **kwargs):
        captured["char_ids"] = char_ids
        return call(self, char_ids, **kwargs)

    def labelled(labels, logits):
        captured["labels"] = labels
        return loss(labels=labels, logits=logits)

    monkeypatch.setattr(MaskedElmoBackbone, "__call__", read)
    monkeypatch.setattr(tf.nn, "sigmoid_cross_entropy_with_logits", labelled)
    sentences = [["w0", "w1", "oov", "w3", "w4"], ["w5", "w6", "w7", "w8", "w9"]]
    originals = np.array([[3, 4, 2, 6, 7], [8, 9, 10, 11, 12]], np.int32)  # 2: <UNK>
    targets = np.where(np.arange(5) % 2 == 0, originals, -1).astype(np.int32)
    x = {"char_ids": tokens_to_char_ids(sentences)}
    spelled = tokens_to_char_ids([WORDS]).numpy()[0]
    replaced_any = False
    for _ in range(5):
        y = {"targets": targets, "cloze_targets": originals}
        model.compute_loss(x=x, y=y, y_pred=model(x, training=True), training=True)
        seen, labels = captured["char_ids"].numpy(), captured["labels"].numpy()
        same = (seen == x["char_ids"].numpy()).all(-1)
        assert same[targets < 0].all()
        drawn = np.array([[int(np.nonzero((spelled == token).all(-1))[0][0])
                           if (spelled == token).all(-1).any() else -1 for token in row]
                          for row in seen])
        assert (drawn[targets >= 0] >= 3).all()  # a word, never <S>, </S> or <UNK>
        np.testing.assert_array_equal(labels, (~same).astype(np.float32))
        replaced_any |= bool(labels.any())
    assert replaced_any  # an untrained generator draws other words


def test_it_trains_from_a_recipe_and_evaluates_held_out(corpus):
    sentences, vocabulary = corpus
    recipe = Recipe.from_dict({"base": "tiny_masked", "replaced_token_weight": 50.0,
                               "cloze_weight": 1.0, "batch_size": 8,
                               "num_negatives": 16})
    lm = build_language_model(recipe, len(vocabulary))
    assert lm.replaced_token_weight == 50.0
    with pytest.raises(ValueError, match=r"call set_vocabulary\(vocabulary.tokens\)"):
        x, y = next(iter(recipe.family.training_batches(
            tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences[:8])),
            vocabulary, recipe, per_replica=8, replicas=1, seed=0, pad_to_buckets=False)))
        lm.compute_loss(x=x, y=y, y_pred=lm(x, training=True), training=True)
    lm.set_vocabulary(vocabulary.tokens)
    data = recipe.family.training_batches(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences[:64])), vocabulary,
        recipe, per_replica=8, replicas=1, seed=0, pad_to_buckets=False)
    held_out = recipe.family.evaluation_batches(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences[100:140])),
        vocabulary, recipe, pad_to_buckets=False)
    before = lm.evaluate(held_out, return_dict=True, verbose=0)
    logs = lm.fit(data, steps_per_epoch=12, epochs=1, verbose=0).history
    assert 0 < logs["replaced_token_accuracy"][-1] <= 1
    results = lm.evaluate(held_out, return_dict=True, verbose=0)
    # The generator learns: its held-out masked LM (the discriminator's task gets harder as it
    # does, so its loss is no measure of progress).
    assert results["loss"] < before["loss"], (before, results)
    assert results["loss"] == pytest.approx(np.log(results["perplexity"]), rel=1e-4)
    assert 0 < results["replaced_token_accuracy"] <= 1 and results["cloze_perplexity"] > 1
    again = lm.evaluate(held_out, return_dict=True, verbose=0)  # a fixed held-out draw
    assert again["replaced_token_accuracy"] == results["replaced_token_accuracy"]


@pytest.mark.parametrize("training", [False, True])
def test_under_xla_the_generator_scores_and_draws_its_selected_rows_only(training, monkeypatch):
    """An equal footing with ELMo for the generator too: with static shapes (XLA) its softmax
    and its draws take the rows with a target sorted first and compute the first `count`
    (`map_leading_rows`: as many equal chunks as they fill, here 3 chunks of 2 rows for 5
    selected of 11, one row computed and dropped), not every position; each drawn word goes
    back to its own row. A softmax that puts each row's mass on one word of its own (logit 30
    against 0) makes the draws known, and the full softmax's NLLs a closed form; training's
    sampled softmax (4 candidates of 20 words, one seed) gives the same sums both ways."""
    model = _model()
    model.softmax.num_negatives = 4 if training else model.softmax.num_negatives
    assert model.softmax.samples == training
    vocabulary, width = len(WORDS), model.backbone.output_dim
    assert width >= vocabulary
    model.softmax.kernel.assign(np.eye(vocabulary, width, dtype=np.float32))
    model.softmax.bias.assign(np.zeros(vocabulary, np.float32))
    words = np.array([3, 9, 4, 12, 5, 17, 8, 6, 10, 11, 13])  # each row's word
    targets = np.array([-1, 9, -1, 3, 5, -1, -1, 16, -1, 11, -1])  # 5 selected, not first
    outputs = tf.constant(30 * np.eye(width, dtype=np.float32)[words])
    drawable = tf.ones([vocabulary], bool)
    seed = tf.constant([1, 2])
    calls = []
    call, draw = model.softmax.call, model.softmax.draw
    monkeypatch.setattr(model.softmax, "call", lambda rows, row_targets, **kwargs: (
        calls.append(("nll", rows.shape[0], kwargs.get("count"))) or
        call(rows, row_targets, **kwargs)))
    monkeypatch.setattr(model.softmax, "draw", lambda rows, *args: (
        calls.append(("draw", rows.shape[0], args[2] if len(args) > 2 else None)) or
        draw(rows, *args)))
    results = {}
    for xla in (False, True):
        model.xla = xla
        calls.clear()
        total, count, drawn = model.selected_nll(outputs, tf.constant(targets), training, seed,
                                                 drawable=drawable)
        results[xla] = float(total), float(count), drawn.numpy()
        if xla:  # every row passed, the 5 selected first and counted
            assert [(kind, rows, int(n)) for kind, rows, n in calls] == [("nll", 11, 5),
                                                                         ("draw", 11, 5)]
        else:  # the 5 selected rows gathered
            assert calls == [("nll", 5, None), ("draw", 5, None)]
    np.testing.assert_array_equal(results[True][2], np.where(targets >= 0, words, -1))
    np.testing.assert_array_equal(results[False][2], results[True][2])
    assert results[True][1] == results[False][1] == 5
    assert results[True][0] == pytest.approx(results[False][0], rel=1e-6)
    if not training:  # log(e^30 + 19) - 30 where the row's word is its target, else log(e^30 + 19)
        selected = targets >= 0
        expected = np.sum(np.logaddexp(30.0, np.log(vocabulary - 1.0))
                          - 30.0 * (targets == words)[selected])
        assert results[True][0] == pytest.approx(expected, rel=1e-6)
    # `draw`'s `count` itself: the rows past it draw nothing (0); and nothing selected at all.
    first = model.softmax.draw(outputs, seed, drawable, tf.constant(4)).numpy()
    np.testing.assert_array_equal(first, np.where(np.arange(11) < 4, words, 0))
    total, count, drawn = model.selected_nll(outputs, tf.fill([11], -1), training, seed,
                                             drawable=drawable)
    assert (float(total), float(count)) == (0.0, 0.0) and (drawn.numpy() == -1).all()


def test_its_training_step_compiles_with_xla(corpus):
    """The compiled step (static shapes: the generator's selected rows scored and drawn in
    equal chunks) on one padded batch: it trains (the generator's loss on that batch falls)
    and scores it."""
    sentences, vocabulary = corpus
    recipe = Recipe.from_dict({"base": "tiny_masked", "replaced_token_weight": 50.0,
                               "cloze_weight": 1.0, "batch_size": 8, "num_negatives": 16})
    lm = build_language_model(recipe, len(vocabulary), xla=True)
    lm.set_vocabulary(vocabulary.tokens)
    x, y = next(iter(recipe.family.training_batches(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences[:8])), vocabulary,
        recipe, per_replica=8, replicas=1, seed=0, pad_to_buckets=True)))
    before = lm.evaluate(x, y, return_dict=True, verbose=0)
    for _ in range(6):
        logs = lm.train_on_batch(x, y, return_dict=True)
    assert np.isfinite(logs["loss"]) and 0 < logs["replaced_token_accuracy"] <= 1
    after = lm.evaluate(x, y, return_dict=True, verbose=0)
    assert after["loss"] < before["loss"], (before, after)


def test_recipe_refusals_and_round_trips(tmp_path):
    with pytest.raises(ValueError, match="replaced_token_weight .*takes mode 'sentence'"):
        Recipe.from_dict({"base": "masked_elmo_small", "replaced_token_weight": 50.0})
    with pytest.raises(ValueError, match="replaced_token_weight takes no next_token_weight"):
        Recipe.from_dict({"base": "masked_elmo_cpu", "replaced_token_weight": 50.0,
                          "next_token_weight": 1.0})
    with pytest.raises(ValueError, match="replaced_token_weight must be"):
        Recipe.from_dict({"base": "masked_elmo_cpu", "replaced_token_weight": -1})
    model = _model(weight=20.0)
    with pytest.raises(ValueError, match="the 20 tokens"):
        model.set_vocabulary(WORDS[:5])
    config = model.get_config()
    assert config["replaced_token_weight"] == 20.0
    clone = MaskedElmoLanguageModel.from_config(config)
    assert clone.replaced_token_weight == 20.0
    # The generator and the head are the task's weights, saved and loaded; the words' char ids
    # are not saved: the vocabulary gives them back.
    path = str(tmp_path / "lm.weights.h5")
    for lm in (model, clone):
        lm({"char_ids": tf.zeros([1, 1, 50], tf.int32)})  # built, as the family builds it
    model.save_weights(path)
    clone.load_weights(path)
    for a, b in zip(model.generator.weights + model.replaced_token_head.weights,
                    clone.generator.weights + clone.replaced_token_head.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not clone.word_char_ids.numpy().any()
    x = {"char_ids": tokens_to_char_ids([["w1", "w2"]])}
    y = {"targets": np.array([[4, -1]], np.int32), "cloze_targets": np.array([[4, 5]], np.int32)}
    with pytest.raises(ValueError, match=r"call set_vocabulary"):
        clone.compute_loss(x=x, y=y, y_pred=clone(x), training=False)
    clone.set_vocabulary(WORDS)
    np.testing.assert_array_equal(clone.word_char_ids.numpy(), model.word_char_ids.numpy())
    assert not model.word_char_ids.numpy()[:3].any()  # the specials: never drawn
