"""Masked ELMo: the masked-LM batches (mask accumulation), the backbone under the contract, the
task's loss, no leak of a masked token, serialization."""

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import ElmoBackbone, ElmoConfig, ElmoEmbedding, tokens_to_char_ids
from elmo_tf.text import Vocabulary
from elmo_tf.text.char_ids import MASK_CHAR, special_token_char_ids
from elmo_tf.data.language_model_dataset import BUCKET_BOUNDARIES
from elmo_tf.data.masked_language_model_dataset import masked_language_model_dataset
from elmo_tf.export import export_saved_model, write_embeddings
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone
from elmo_tf.models.masked_elmo.masked_elmo_config import MaskedElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_language_model import MaskedElmoLanguageModel
from elmo_tf.ops.masking import mask_tokens
from tests import reference
from tests.checks import run_backbone_test, run_task_test
from tests.conftest import assert_skipping_resumes_exactly

TOKENS = [["a", "bb", "ccc"], ["dddd", "", ""]]


def _dataset(sentences, vocabulary, **kwargs):
    data = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences))
    return masked_language_model_dataset(data, vocabulary, **kwargs)


def _tiny_backbone(**kwargs):
    keras.utils.set_random_seed(0)
    return MaskedElmoBackbone.from_architecture("tiny_masked", **kwargs)


@pytest.mark.parametrize("rate, covers_all", [(0.15, False), (0.4, True)])
def test_mask_accumulation_gives_each_copy_its_own_tokens(corpus, rate, covers_all):
    sentences, vocabulary = corpus
    k = 3
    originals = [tokens_to_char_ids([s]).numpy()[0] for s in sentences[:4]]
    found = []
    for inputs, targets in _dataset(sentences[:4], vocabulary, batch_size=12,
                                    masks_per_sentence=k, rate=rate, repeat=False):
        targets, masked = targets["targets"].numpy(), inputs["char_ids"].numpy()
        for group in range(len(targets) // k):  # a sentence's copies are consecutive rows
            copies, chars = (a[group * k:(group + 1) * k] for a in (targets, masked))
            # Its tokens, from a copy that does not predict them (disjoint: at most one does).
            n = int((chars[0] != 0).any(-1).sum())
            selected = copies[:, :n] >= 0
            assert selected.sum(0).max() <= 1
            if covers_all:
                assert selected.sum(0).min() == 1
            tokens = np.stack([chars[int(np.argmin(selected[:, t])), t] for t in range(n)])
            s = next(i for i, o in enumerate(originals)
                     if o.shape == tokens.shape and (o == tokens).all())
            found.append(s)
            ids = vocabulary.lookup(tf.constant(sentences[s])).numpy()
            for row, row_chars in zip(copies, chars):
                np.testing.assert_array_equal(row[:n][row[:n] >= 0], ids[row[:n] >= 0])
                # What the model reads: unselected tokens as they are, selected ones mostly
                # masked, nothing past the sentence.
                np.testing.assert_array_equal(row_chars[:n][row[:n] < 0],
                                              originals[s][row[:n] < 0])
                assert not row_chars[n:].any() and (row[n:] < 0).all()
                is_mask = (row_chars[:n] == special_token_char_ids(MASK_CHAR)).all(-1)
                assert not is_mask[row[:n] < 0].any()
    assert sorted(found) == [0, 1, 2, 3]
    # Over many sentences each copy predicts `rate` of the tokens.
    selected = masks = 0
    for inputs, targets in _dataset(sentences[:200], vocabulary, batch_size=600,
                                    masks_per_sentence=k, rate=0.15, repeat=False):
        chosen = targets["targets"].numpy() >= 0
        is_mask = (inputs["char_ids"].numpy() == special_token_char_ids(MASK_CHAR)).all(-1)
        selected, masks = selected + chosen.sum(), masks + is_mask[chosen].sum()
    n_tokens = sum(len(s) for s in sentences[:200])
    assert abs(selected / (k * n_tokens) - 0.15) < 0.02
    assert abs(masks / selected - 0.8) < 0.05  # BERT's 80 % of the selected


def test_sentence_batches_are_bucketed_by_length(corpus):
    # A batch of random sentences would run the LSTMs over the longest of them.
    sentences, vocabulary = corpus
    buckets = set()
    for inputs, _ in _dataset(sentences, vocabulary, batch_size=16, masks_per_sentence=2,
                              seed=3).take(30):
        steps = (inputs["char_ids"].numpy() != 0).any(-1).sum(-1) + 2  # with <S> and </S>
        bucket = np.searchsorted(BUCKET_BOUNDARIES, steps, side="right")
        assert len(set(bucket)) == 1, steps
        buckets.add(int(bucket[0]))
        assert (steps[0::2] == steps[1::2]).all()  # a sentence's two copies share the batch
    assert len(buckets) > 1  # the corpus spans several buckets


def test_held_out_masking_is_fixed_by_the_seed(corpus):
    sentences, vocabulary = corpus
    runs = [[t["targets"].numpy() for _, t in _dataset(sentences[:40], vocabulary, batch_size=8,
                                                       repeat=False, seed=s)] for s in (1, 1, 2)]
    for a, b in zip(runs[0], runs[1]):
        np.testing.assert_array_equal(a, b)
    assert any((a != c).any() for a, c in zip(runs[0], runs[2]))


@pytest.mark.parametrize("mode", ["sentence", "stream"])
def test_training_batches_are_reproducible_so_skipping_resumes_exactly(corpus, mode):
    sentences, vocabulary = corpus
    assert_skipping_resumes_exactly(lambda seed: _dataset(
        sentences, vocabulary, mode=mode, batch_size=8, window=6, seed=seed))


def test_a_masked_token_does_not_leak_into_its_prediction():
    # Two sentences that differ only at position 2: masked there, they predict the same (the
    # model reads nothing but the masked char ids: no other path to the original token).
    backbone = _tiny_backbone()
    model = MaskedElmoLanguageModel(backbone, vocabulary_size=50, num_negatives=8)
    table = tokens_to_char_ids([[f"w{i}" for i in range(50)]])[0]
    char_ids = tokens_to_char_ids([["the", "dog", "barks", "."], ["the", "dog", "sleeps", "."]])
    word_ids = tf.constant([[-1, -1, 7, -1], [-1, -1, 9, -1]])
    masked, targets = mask_tokens(char_ids, word_ids, [5, 6], table, rate=1.0, mask_rate=1.0,
                                  random_rate=0.0)
    assert targets.numpy().tolist() == [[-1, -1, 7, -1], [-1, -1, 9, -1]]
    np.testing.assert_array_equal(masked[0, 2], special_token_char_ids(MASK_CHAR))
    outputs = model({"char_ids": masked}).numpy()
    # (Equal up to float rounding: a CPU's matrix product may round a row by its place in the
    # batch; `test_the_cloze_loss_on_stream_windows`.)
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=0, atol=1e-6)
    # ...and unmasked they differ at every position, the first included (fully bidirectional;
    # by 3.9e-3 at the least, measured).
    plain = model({"char_ids": char_ids}).numpy()
    assert (np.abs(plain[0] - plain[1]).max(-1) > 1e-3).all()


def test_next_token_targets_are_each_positions_neighbours_on_the_boundary_grid():
    vocabulary = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c"])
    data = _dataset([["a", "b", "c"], ["c", "zzz"]], vocabulary, batch_size=4,
                    masks_per_sentence=2, repeat=False, next_token_targets=True)
    (_, targets), = list(data)
    # <S> a b c </S>: forward targets a b c </S> -, backward - <S> a b c; <S> c zzz </S>,
    # zzz unknown; each sentence's two copies share them, padding is -1.
    forward = [[3, 4, 5, 1, -1]] * 2 + [[5, 2, 1, -1, -1]] * 2
    backward = [[-1, 0, 3, 4, 5]] * 2 + [[-1, 0, 5, 2, -1]] * 2
    assert targets["forward_targets"].numpy().tolist() == forward
    assert targets["backward_targets"].numpy().tolist() == backward
    # The masked LM's targets are those words where selected.
    selected = targets["targets"].numpy()
    words = np.array(forward)[:, :3]
    assert ((selected == -1) | (selected == words)).all()
    with pytest.raises(ValueError, match="next_token_targets is for sentence batches"):
        _dataset([["a"]], vocabulary, mode="stream", next_token_targets=True)


def test_the_next_token_loss_reads_the_first_layer_one_side_at_a_time_and_adds_its_mean():
    """The first layer's forward half at a position has not read the next token (nor its
    backward half the previous one): no leak. The loss is the masked LM's plus the weight times
    the mean of both directions' next-token NLL, through the one softmax's halves (full softmax
    here: V is below the negatives), only where a target is defined."""
    vocabulary_size, weight = 20, 0.5
    model = MaskedElmoLanguageModel(_tiny_backbone(), vocabulary_size, num_negatives=64,
                                    next_token_weight=weight)
    char_ids = tokens_to_char_ids([["a", "b", "c", "d"], ["a", "b", "x", "d"]])
    out = {k: v.numpy() for k, v in model({"char_ids": char_ids}).items()}
    half = out["first_layer"].shape[-1] // 2
    # Grid <S> a b c|x d </S>: token 3 (c or x) is at grid position 3.
    forward, backward = out["first_layer"][..., :half], out["first_layer"][..., half:]
    # (Equal up to float rounding, each row read 9e-3 away by the changed token: as in
    # `test_the_cloze_loss_on_stream_windows`.)
    np.testing.assert_allclose(forward[0, :3], forward[1, :3], rtol=0, atol=1e-6)
    np.testing.assert_allclose(backward[0, 4:], backward[1, 4:], rtol=0, atol=1e-6)
    assert np.abs(forward[0, 3] - forward[1, 3]).max() > 1e-3
    assert np.abs(backward[0, 3] - backward[1, 3]).max() > 1e-3
    # The loss, from the softmax's own weights.
    rng = np.random.default_rng(0)
    targets = {"targets": np.array([[-1, 4, -1, -1], [-1, -1, -1, 7]], np.int32),
               "forward_targets": rng.integers(0, vocabulary_size, (2, 6)).astype(np.int32),
               "backward_targets": rng.integers(0, vocabulary_size, (2, 6)).astype(np.int32)}
    targets["forward_targets"][:, -1] = targets["backward_targets"][:, 0] = -1
    targets["forward_targets"][1, 3:] = -1
    kernel, bias = model.softmax.kernel.numpy(), model.softmax.bias.numpy()

    def nll(rows, ids):
        logits = rows @ kernel.T + bias
        logits -= logits.max(-1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -log_p[np.arange(len(ids)), ids]

    def mean_nll(rows, ids):
        keep = ids.reshape(-1) >= 0
        return nll(rows.reshape(-1, rows.shape[-1])[keep], ids.reshape(-1)[keep]).mean()

    zeros = np.zeros_like(forward)
    expected = mean_nll(out["masked"], targets["targets"]) + weight * 0.5 * (
        mean_nll(np.concatenate([forward, zeros], -1), targets["forward_targets"])
        + mean_nll(np.concatenate([zeros, backward], -1), targets["backward_targets"]))
    y_pred = model({"char_ids": char_ids})
    loss = model.compute_loss(y=targets, y_pred=y_pred, training=True)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # In evaluation the loss is the masked LM's alone; the next-token perplexity is measured
    # (over both directions' defined targets).
    model.next_token_perplexity.reset_state()
    masked_alone = mean_nll(out["masked"], targets["targets"])
    evaluated = model.compute_loss(y=targets, y_pred=y_pred, training=False)
    assert float(evaluated) == pytest.approx(masked_alone, rel=1e-5)
    both = np.concatenate([
        nll(np.concatenate([forward, zeros], -1).reshape(-1, 2 * half),
            targets["forward_targets"].reshape(-1).clip(0))[
            targets["forward_targets"].reshape(-1) >= 0],
        nll(np.concatenate([zeros, backward], -1).reshape(-1, 2 * half),
            targets["backward_targets"].reshape(-1).clip(0))[
            targets["backward_targets"].reshape(-1) >= 0]])
    assert float(model.next_token_perplexity.result()) == pytest.approx(
        np.exp(both.mean()), rel=1e-4)
    # Batches without the next-token targets: scored on the masked LM alone in evaluation,
    # refused in training (the loss would silently be the masked LM's).
    alone = model.compute_loss(y={"targets": targets["targets"]}, y_pred=y_pred, training=False)
    assert float(alone) == pytest.approx(masked_alone, rel=1e-5)
    with pytest.raises(ValueError, match=r"need \['backward_targets', 'forward_targets'\] too"):
        model.compute_loss(y={"targets": targets["targets"]}, y_pred=y_pred, training=True)
    for bad in (True, float("inf"), -1.0, "1"):
        with pytest.raises(ValueError, match="next_token_weight must be a number >= 0"):
            MaskedElmoLanguageModel(_tiny_backbone(), vocabulary_size, next_token_weight=bad)
    with pytest.raises(ValueError, match="next_token_weight > 0"):
        MaskedElmoLanguageModel(_tiny_backbone(), vocabulary_size).compute_loss(
            y=targets, y_pred=out["masked"])


def test_the_cloze_loss_predicts_each_token_from_the_first_layers_halves_around_it(corpus):
    """The two-tower cloze loss: token k is predicted from the first layer's forward half at
    grid position k (it has read <S> and the tokens before k) and its backward half at k + 2
    (the tokens after k and </S>): no leak, every token (selected or not), and the loss is the
    masked LM's plus the weight times the cloze mean NLL, against a NumPy reference of the
    softmax; in evaluation the loss is the masked LM's and the cloze perplexity is measured."""
    sentences, vocabulary = corpus
    weight = 0.7
    model = MaskedElmoLanguageModel(_tiny_backbone(), 20, num_negatives=64, cloze_weight=weight)
    # No leak: change token 2 of a sentence; the rows that predict it do not move.
    char_ids = tokens_to_char_ids([["a", "b", "c", "d"], ["a", "b", "x", "d"]])
    first = model({"char_ids": char_ids})["first_layer"].numpy()
    half = first.shape[-1] // 2
    rows = np.concatenate([first[:, :-2, :half], first[:, 2:, half:]], -1)  # token k's row
    # (Equal up to float rounding: `test_the_cloze_loss_on_stream_windows`.)
    np.testing.assert_allclose(rows[0, 2], rows[1, 2], rtol=0, atol=1e-6)
    assert np.abs(rows[0, 1] - rows[1, 1]).max() > 1e-3  # token 1's backward half has read it
    assert np.abs(rows[0, 3] - rows[1, 3]).max() > 1e-3  # token 3's forward half has read it
    # A shorter row in a padded batch: its tokens' rows are those of the sentence alone (the
    # backward half of its last token sits on its own </S>, not on padding).
    padded = model({"char_ids": tokens_to_char_ids([["a", "b", "c", "d"], ["a", "b"]])})
    alone = model({"char_ids": tokens_to_char_ids([["a", "b"]])})

    def cloze_rows(first_layer):
        first_layer = first_layer.numpy()
        return np.concatenate([first_layer[:, :-2, :half], first_layer[:, 2:, half:]], -1)

    np.testing.assert_allclose(cloze_rows(padded["first_layer"])[1, :2],
                               cloze_rows(alone["first_layer"])[0], atol=1e-6)
    # The loss against NumPy (full softmax: 20 words, 64 negatives).
    targets = {"targets": np.array([[-1, 4, -1, -1], [-1, -1, -1, 7]], np.int32),
               "cloze_targets": np.array([[3, 4, 5, 6], [3, 4, 9, -1]], np.int32)}
    y_pred = model({"char_ids": char_ids})
    kernel, bias = model.softmax.kernel.numpy(), model.softmax.bias.numpy()

    def mean_nll(outputs, ids):
        return reference.softmax_nll(outputs, ids, kernel, bias).mean()

    masked_alone = mean_nll(y_pred["masked"].numpy(), targets["targets"])
    cloze = mean_nll(rows, targets["cloze_targets"])
    loss = model.compute_loss(y=targets, y_pred=y_pred, training=True)
    assert float(loss) == pytest.approx(masked_alone + weight * cloze, rel=1e-5)
    model.cloze_perplexity.reset_state()
    evaluated = model.compute_loss(y=targets, y_pred=y_pred, training=False)
    assert float(evaluated) == pytest.approx(masked_alone, rel=1e-5)
    assert float(model.cloze_perplexity.result()) == pytest.approx(np.exp(cloze), rel=1e-5)
    with pytest.raises(ValueError, match=r"need \['cloze_targets'\] too"):
        model.compute_loss(y={"targets": targets["targets"]}, y_pred=y_pred, training=True)
    # The batches: every token's id, selected or not, -1 at padding.
    x, y = next(iter(_dataset(sentences[:8], vocabulary, batch_size=8, repeat=False,
                              cloze_targets=True)))
    words = y["cloze_targets"].numpy()
    assert ((words >= 0) == x["char_ids"].numpy().any(-1)).all()
    selected = y["targets"].numpy()
    assert (selected[selected >= 0] == words[selected >= 0]).all()
    # It trains in fit, from a recipe.
    from elmo_tf.recipes.recipe import Recipe
    from elmo_tf.training.pretraining import build_language_model

    recipe = Recipe.from_dict({"base": "tiny_masked", "cloze_weight": 0.5, "batch_size": 8})
    lm = build_language_model(recipe, len(vocabulary))
    assert lm.cloze_weight == 0.5
    data = recipe.family.training_batches(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences[:64])), vocabulary,
        recipe, per_replica=8, replicas=1, seed=0, pad_to_buckets=False)
    logs = lm.fit(data, steps_per_epoch=2, epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][-1]) and 1 < logs["cloze_perplexity"][-1] < np.inf


def test_the_cloze_loss_on_stream_windows(corpus):
    """On stream windows (one shape for XLA) the cloze loss predicts each word inside a
    window from the first layer's halves around it: no leak (in the rows that carry the
    forward state and in those that carry the backward one, a window after the first), a
    window's first and last tokens and `<S>`/`</S>` not predicted, and the loss is the masked
    LM's plus the weight times the cloze mean NLL against NumPy; it trains from a recipe."""
    from elmo_tf.recipes.recipe import Recipe
    from elmo_tf.training.pretraining import build_language_model

    sentences, vocabulary = corpus
    weight = 0.7
    model = MaskedElmoLanguageModel(_tiny_backbone(stream_rows=4), 20, num_negatives=64,
                                    cloze_weight=weight)
    # Rows 0-1 carry the forward state, rows 2-3 the backward one; the first window is the
    # same in rows 0 and 1 (and in 2 and 3), the second differs at token 2 only.
    first_window = tokens_to_char_ids([["p", "q", "r", "s", "t"]] * 4)
    model({"stream_char_ids": first_window})
    second = tokens_to_char_ids([["a", "b", "c", "d", "e"], ["a", "b", "x", "d", "e"]] * 2)
    y_pred = model({"stream_char_ids": second})
    first = y_pred["first_layer"].numpy()
    assert first.shape[1] == 5 + 2 and not first[:, [0, -1]].any()  # a zero row either side
    half = first.shape[-1] // 2
    rows = np.concatenate([first[:, :-2, :half], first[:, 2:, half:]], -1)  # token k's row
    # (Equal up to float rounding, not bit for bit: on some CPUs (an AMD EPYC, 2026-12-01)
    # a matrix product rounds a row by its place in the batch, 1.9e-8 apart here; a token
    # read moves its row by about 9e-3.)
    for a, b in ((0, 1), (2, 3)):
        np.testing.assert_allclose(rows[a, 2], rows[b, 2], rtol=0, atol=1e-6)
        assert np.abs(rows[a, 1] - rows[b, 1]).max() > 1e-3  # its backward half has read token 2
        assert np.abs(rows[a, 3] - rows[b, 3]).max() > 1e-3  # its forward half has read it
    # The loss against NumPy (full softmax: 20 words, 64 negatives).
    targets = {"targets": np.array([[-1, 4, -1, -1, -1]] * 4, np.int32),
               "cloze_targets": np.array([[-1, 4, 5, 6, -1]] * 4, np.int32)}
    kernel, bias = model.softmax.kernel.numpy(), model.softmax.bias.numpy()

    def mean_nll(outputs, ids):
        return reference.softmax_nll(outputs, ids, kernel, bias).mean()

    expected = (mean_nll(y_pred["masked"].numpy(), targets["targets"])
                + weight * mean_nll(rows, targets["cloze_targets"]))
    loss = model.compute_loss(y=targets, y_pred=y_pred, training=True)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # The batches: every word's id inside the window (a selected one's is its target, an
    # unselected one is read as it is), -1 at the window's first and last tokens and at the
    # boundaries.
    char_ids = {tuple(tokens_to_char_ids([[w]]).numpy()[0, 0]): i
                for i, w in enumerate(vocabulary.tokens)}
    batches = _dataset(sentences[:40], vocabulary, mode="stream", batch_size=4, window=7,
                       cloze_targets=True, rate=0.4, repeat=False)
    inner_boundaries = 0
    for x, y in batches.take(8):
        cloze, selected = y["cloze_targets"].numpy(), y["targets"].numpy()
        inputs = x["stream_char_ids"].numpy()
        assert (cloze[:, [0, -1]] == -1).all()
        for r, t in zip(*np.nonzero(np.ones_like(cloze[:, 1:-1]))):
            t += 1
            token = tuple(inputs[r, t])
            if selected[r, t] >= 0:
                assert cloze[r, t] == selected[r, t]
            elif not any(token) or char_ids.get(token) in (vocabulary.bos_id,
                                                           vocabulary.eos_id):
                assert cloze[r, t] == -1  # padding, <S>, </S>
                inner_boundaries += any(token)
            else:
                assert cloze[r, t] == char_ids.get(token, vocabulary.unk_id)
    assert inner_boundaries  # (the windows' insides hold some)
    recipe = Recipe.from_dict({"base": "tiny_masked", "mode": "stream", "cloze_weight": 0.5,
                               "batch_size": 4})
    lm = build_language_model(recipe, len(vocabulary))
    data = recipe.family.training_batches(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences[:64])), vocabulary,
        recipe, per_replica=4, replicas=1, seed=0, pad_to_buckets=False)
    logs = lm.fit(data, steps_per_epoch=2, epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][-1]) and 1 < logs["cloze_perplexity"][-1] < np.inf


def test_the_softmax_scores_the_selected_positions_only_to_the_same_loss(corpus, monkeypatch):
    """An equal footing with ELMo: the masked LM's softmax rows are its selected positions
    (it scored every position, 60 % of them weighted 0 at 40 % selected), and the next-token
    loss's rows its defined targets, each P wide against its half of the softmax's columns
    (it scored [forward; 0] and [0; backward] rows, twice as wide). Training's sampled
    softmax, one set of candidates for all three (one seed): the loss and the perplexities
    are those of scoring every row at full width with the same candidates."""
    sentences, vocabulary = corpus
    model = MaskedElmoLanguageModel(_tiny_backbone(), len(vocabulary), num_negatives=16,
                                    next_token_weight=0.5)
    assert model.softmax.samples
    x, y = next(iter(_dataset(sentences[:16], vocabulary, batch_size=16, rate=0.4,
                              repeat=False, next_token_targets=True)))
    y_pred = model(x)
    seed = tf.constant([3, 4])
    monkeypatch.setattr(model.softmax, "draw_seed", lambda: seed)
    scored = []
    call = model.softmax.call
    monkeypatch.setattr(model.softmax, "call", lambda outputs, targets, **kwargs: (
        scored.append((tuple(outputs.shape), kwargs.get("count"))) or
        call(outputs, targets, **kwargs)))
    loss = float(model.compute_loss(y=y, y_pred=y_pred, training=True))
    width = model.backbone.output_dim
    counts = {name: int((y[name].numpy() >= 0).sum()) for name in y}
    assert scored == [((counts["targets"], width), None),
                      ((counts["forward_targets"], width // 2), None),
                      ((counts["backward_targets"], width // 2), None)]
    assert counts["targets"] < 0.6 * y["targets"].numpy().size  # rows saved
    # Static shapes (XLA): every row passed; the masked LM's, few, with the ones with a
    # target first and `count` of them scored (`map_leading_rows`, tested in
    # tests/ops/test_chunking.py); the next-token loss's, almost all, in one product.
    model.xla = True
    scored.clear()
    assert float(model.compute_loss(y=y, y_pred=y_pred, training=True)) == pytest.approx(
        loss, rel=1e-5)
    size = {name: y[name].numpy().size for name in y}
    assert [(shape, None if count is None else int(count)) for shape, count in scored] == [
        ((size["targets"], width), counts["targets"]),
        ((size["forward_targets"], width // 2), None),
        ((size["backward_targets"], width // 2), None)]
    monkeypatch.undo()

    def every_row(rows, targets):  # all positions, full width, the same candidates
        rows, targets = tf.reshape(rows, [-1, width]), tf.reshape(targets, [-1])
        nll = model.softmax(rows, tf.maximum(targets, 0), training=True, seed=seed)
        return float(tf.reduce_sum(tf.where(targets >= 0, nll, 0.0)))

    half = width // 2
    first = y_pred["first_layer"]
    zeros = tf.zeros_like(first[..., :half])
    expected = (every_row(y_pred["masked"], y["targets"]) / counts["targets"]
                + 0.5 * 0.5 * (every_row(tf.concat([first[..., :half], zeros], -1),
                                         y["forward_targets"]) / counts["forward_targets"]
                               + every_row(tf.concat([zeros, first[..., half:]], -1),
                                           y["backward_targets"]) / counts["backward_targets"]))
    assert loss == pytest.approx(expected, rel=1e-5)


def test_compiled_with_xla_the_selected_rows_give_the_same_loss_and_gradients(corpus):
    """Under XLA (static shapes) the selected rows are sorted first and scored in as many of
    `LEADING_ROW_CHUNKS` equal chunks as they fill, not every position: compiled, the loss
    (training's sampled softmax, and evaluation's full one) and every gradient are those of
    the uncompiled model, which gathers the selected rows. (That fewer rows are scored is
    checked by `test_the_softmax_scores_the_selected_positions_only_to_the_same_loss` and
    `map_leading_rows`'s tests; this one checks the sums.) Both losses in one compiled
    program: one model, one compilation. The batch is padded to its length bucket, as
    compiled training reads it (`pad_to_buckets`: the padding predicts nothing). (A compiled
    step trains a bucket-padded batch, its masked-LM loss falling, in
    `test_replaced_token_detection.py`'s `test_its_training_step_compiles_with_xla`, and
    stream batches in `test_stream_training_carries_state_in_mixed_precision_under_xla`.)"""
    sentences, vocabulary = corpus
    model = MaskedElmoLanguageModel(_tiny_backbone(), len(vocabulary), num_negatives=16,
                                    next_token_weight=0.5)
    # Of the batches, the one with the most selected tokens (22, in 5 sentences and 11 rows
    # of padding).
    x, y = max(_dataset(sentences[:16], vocabulary, batch_size=16, rate=0.4, repeat=False,
                        next_token_targets=True, pad_to_buckets=True),
               key=lambda batch: int(tf.reduce_sum(tf.cast(batch[1]["targets"] >= 0, "int32"))))
    assert (y["targets"].numpy() >= 0).sum() > 10 and not x["char_ids"].numpy()[-1].any()
    seed = tf.constant([5, 6])
    model.softmax.draw_seed = lambda: seed

    def losses_and_gradients():
        results = []
        for training in (True, False):
            with tf.GradientTape() as tape:
                loss = model.compute_loss(y=y, y_pred=model(x, training=False),
                                          training=training)
            results.append((loss, tape.gradient(loss, model.trainable_variables)))
        return results

    expected = losses_and_gradients()
    model.xla = True
    compiled = tf.function(losses_and_gradients, jit_compile=True)()
    for training, (loss, gradients), (compiled_loss, compiled_gradients) in zip(
            (True, False), expected, compiled):
        assert float(compiled_loss) == pytest.approx(float(loss), rel=1e-5), training
        for variable, want, got in zip(model.trainable_variables, gradients,
                                       compiled_gradients):
            np.testing.assert_allclose(tf.convert_to_tensor(got), tf.convert_to_tensor(want),
                                       rtol=1e-4, atol=1e-6,
                                       err_msg=f"training={training}: {variable.path}")


def test_the_next_token_loss_trains_in_fit_and_evaluates_on_masked_batches(corpus):
    sentences, vocabulary = corpus
    model = MaskedElmoLanguageModel(_tiny_backbone(), len(vocabulary), num_negatives=64,
                                    next_token_weight=1.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    train = _dataset(sentences, vocabulary, batch_size=16, next_token_targets=True)
    logs = model.fit(train, steps_per_epoch=3, epochs=1, verbose=0).history
    assert {"loss", "perplexity", "next_token_perplexity"} <= set(logs)
    assert np.isfinite(logs["loss"][-1])
    # Held-out batches with the targets measure the next-token perplexity (a real one, not
    # the 1.0 of nothing counted); their loss is the masked LM's, as without them.
    with_targets = model.evaluate(_dataset(sentences[:40], vocabulary, batch_size=16,
                                           repeat=False, next_token_targets=True),
                                  return_dict=True, verbose=0)
    without = model.evaluate(_dataset(sentences[:40], vocabulary, batch_size=16, repeat=False),
                             return_dict=True, verbose=0)
    assert with_targets["loss"] == pytest.approx(without["loss"], rel=1e-5)
    assert with_targets["perplexity"] == pytest.approx(without["perplexity"], rel=1e-5)
    assert 1.0 < with_targets["next_token_perplexity"] < np.inf
    assert np.isnan(without["next_token_perplexity"])  # nothing counted: undefined


def _decoded(char_ids, known):
    """Tokens back from char ids: `known` maps each token's char ids (a tuple) to it."""
    return [[known[tuple(token)] for token in row] for row in char_ids.tolist()]


def test_held_out_batches_padded_for_xla_take_one_shape_per_bucket_and_score_the_same(corpus):
    """`pad_to_buckets` pads the `<S> .. </S>` grid to its bucket's longest length and a smaller
    last batch to full rows, as ELMo's batches: the padding predicts nothing, so the held-out
    figures (masked-LM and next-token perplexities) are those of the unpadded batches."""
    sentences, vocabulary = corpus
    sentences = sentences[:60] + [["a"] * 40]  # a bucket of its own, a batch of one row
    kwargs = dict(batch_size=16, repeat=False, next_token_targets=True)
    plain, padded = (_dataset(sentences, vocabulary, pad_to_buckets=p, **kwargs)
                     for p in (False, True))
    shapes = set()
    for (x, y), (px, py) in zip(plain, padded):
        rows, time = y["targets"].shape
        shapes.add(tuple(py["targets"].shape))
        assert py["targets"].shape[0] == 16
        assert py["targets"].shape[1] + 2 == min(b - 1 for b in BUCKET_BOUNDARIES
                                                 if b - 1 >= time + 2)
        np.testing.assert_array_equal(px["char_ids"][:rows, :time], x["char_ids"])
        assert not px["char_ids"][:, time:].numpy().any()
        assert not px["char_ids"][rows:].numpy().any()
        for name in y:
            width = y[name].shape[1]
            np.testing.assert_array_equal(py[name][:rows, :width], y[name])
            assert (py[name][:, width:].numpy() == -1).all()
            assert (py[name][rows:].numpy() == -1).all()
    assert (16, 47 - 2) in shapes  # 40 words and <S> </S>: bucket [40, 48), padded to 47
    model = MaskedElmoLanguageModel(_tiny_backbone(), len(vocabulary), num_negatives=8,
                                    next_token_weight=1.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    scores = [model.evaluate(data, return_dict=True, verbose=0) for data in (plain, padded)]
    for name in ("perplexity", "next_token_perplexity", "loss"):
        assert scores[1][name] == pytest.approx(scores[0][name], rel=1e-5), name
    # The loss weighs each batch by its masked tokens: exp(loss) is the masked-LM perplexity,
    # whatever the batches' lengths, padding and rows.
    for score in scores:
        assert np.exp(score["loss"]) == pytest.approx(score["perplexity"], rel=1e-5), score


def test_stream_batches_read_half_the_rows_left_to_right_and_half_right_to_left(corpus):
    sentences, vocabulary = corpus
    tokens = sorted({t for s in sentences for t in s} | {"<S>", "</S>"})
    known = {tuple(ids): t for t, ids in zip(tokens, tokens_to_char_ids([tokens]).numpy()[0])}
    whole = {tuple(["<S>", *s, "</S>"]) for s in sentences}
    data = _dataset(sentences, vocabulary, mode="stream", batch_size=6, window=7, rate=1e-9,
                    replicas=2)  # (nothing selected: the text stays readable)
    parts = [_decoded(x["stream_char_ids"].numpy(), known) for x, _ in data.take(2 * 30)]
    for replica in range(2):
        rows = list(zip(*parts[replica::2]))  # a replica always gets its own 3 rows
        # The first 2 rows read left to right (each window after the previous one), the last
        # right to left (each window before the previous one): either way the text is whole
        # sentences of the corpus, back to back.
        for r, windows in enumerate(rows):
            text = sum(windows if r < 2 else windows[::-1], [])
            starts = [i for i, t in enumerate(text) if t == "<S>"]
            inner = [tuple(text[a:b]) for a, b in zip(starts, starts[1:])]
            assert len(inner) > 5 and set(inner) <= whole, (replica, r)
    masked = _dataset(sentences, vocabulary, mode="stream", batch_size=6, window=7)
    x, y = next(iter(masked))
    targets, ids = y["targets"].numpy(), x["stream_char_ids"].numpy()
    boundary = {ids for ids, t in known.items() if t in ("<S>", "</S>")}
    is_boundary = np.array([[tuple(t) in boundary for t in row] for row in ids])
    assert (targets >= 0).any() and not (targets[is_boundary] >= 0).any()
    with pytest.raises(ValueError, match="stream batches take masks_per_sentence 1"):
        _dataset(sentences, vocabulary, mode="stream", masks_per_sentence=2)


def test_stream_training_carries_state_in_mixed_precision_under_xla(corpus):
    """What `elmo-tf train --mixed-precision bfloat16` runs on one GPU, stream batches."""
    sentences, vocabulary = corpus
    data = _dataset(sentences, vocabulary, mode="stream", batch_size=4, window=6)
    backbone = _tiny_backbone(stream_rows=4, dtype="mixed_bfloat16")
    model = MaskedElmoLanguageModel(backbone, len(vocabulary), num_negatives=8)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), xla=True)
    history = model.fit(data, steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert backbone.bilm.compute_dtype == "bfloat16" and backbone.bilm.state_h.dtype == "float32"
    assert model.softmax.compute_dtype == "float32"  # the loss in float32
    state = backbone.bilm.state_h.numpy()  # [direction, layer, row, P]
    assert np.abs(state[0, :, :2]).min(-1).all() and not state[0, :, 2:].any()  # forward
    assert np.abs(state[1, :, 2:]).min(-1).all() and not state[1, :, :2].any()  # backward
    # Sentence batches (evaluation) read from zero state and leave the kept state alone.
    (x, y), = _dataset(sentences[:4], vocabulary, batch_size=4, repeat=False).take(1)
    model.evaluate(x, y, verbose=0)
    np.testing.assert_array_equal(backbone.bilm.state_h.numpy(), state)
    restored = MaskedElmoBackbone.from_config(backbone.get_config())
    assert restored.stream_rows == 4 and restored.get_config() == backbone.get_config()


def test_keeps_the_backbone_contract(tmp_path):
    _tiny_backbone().save_allennlp(tmp_path / "w.hdf5", tmp_path / "o.json")
    run_backbone_test(lambda **kwargs: MaskedElmoBackbone.from_allennlp(
        tmp_path / "o.json", tmp_path / "w.hdf5", **kwargs), tmp_path)


def test_keeps_the_task_contract(tmp_path, corpus):
    _, vocabulary = corpus
    model = MaskedElmoLanguageModel(_tiny_backbone(dropout=0.1), len(vocabulary),
                                    num_negatives=8)
    char_ids = tokens_to_char_ids(TOKENS)
    targets = np.array([[3, -1, 5], [-1, -1, -1]], np.int32)
    run_task_test(model, {"char_ids": char_ids}, {"targets": targets}, tmp_path)
    restored = keras.models.load_model(tmp_path / "task.keras")
    assert isinstance(restored.backbone, MaskedElmoBackbone) and restored.backbone.dropout == 0.1


def test_embedding_export_and_dump_take_a_masked_elmo_backbone(tmp_path):
    backbone = _tiny_backbone()
    expected = backbone(tokens_to_char_ids(TOKENS))
    elmo = ElmoEmbedding(backbone, dropout=0.0)
    np.testing.assert_allclose(elmo(TOKENS), expected["layers"].numpy().mean(axis=1), atol=1e-6)
    path = export_saved_model(elmo, tmp_path / "serving")
    served = tf.saved_model.load(path).signatures["tokens"](
        tokens=tf.constant([["a", "bb", "ccc"], ["dddd", "", ""]]),
        sequence_len=tf.constant([3, 1]))
    np.testing.assert_allclose(served["lstm_outputs2"], expected["layers"][:, 2], atol=1e-5)
    write_embeddings(backbone, [["a", "bb", "ccc"], ["dddd"]], tmp_path / "v.hdf5",
                     progress=False)
    with h5py.File(tmp_path / "v.hdf5", "r") as f:
        np.testing.assert_allclose(f["0"][...], expected["layers"][0], atol=1e-5)


def test_released_elmo_token_encoder_weights_initialise_it():
    elmo = ElmoBackbone(ElmoConfig.from_preset("tiny"))
    masked = _tiny_backbone()
    masked.load_token_encoder_from(elmo)
    ids = tokens_to_char_ids(TOKENS)
    np.testing.assert_array_equal(masked(ids)["token_embeddings"], elmo(ids)["token_embeddings"])


@pytest.mark.parametrize("cells", ["without_projection", "clipped"])
def test_cell_variants_keep_their_weights_through_hdf5_options_and_keras(tmp_path, cells):
    import dataclasses
    import json

    from elmo_tf.models import load_backbone

    base = MaskedElmoConfig.from_architecture("tiny_masked")
    config = (dataclasses.replace(base, lstm_dim=base.projection_dim, lstm_projection=False)
              if cells == "without_projection"
              else dataclasses.replace(base, cell_clip=0.5, proj_clip=0.4))
    keras.utils.set_random_seed(0)
    backbone = MaskedElmoBackbone(config)
    for v in backbone.bilm.weights:  # large weights: the clips act
        v.assign(v * 20.0)
    ids = tokens_to_char_ids(TOKENS)
    expected = backbone(ids)["layers"]
    if cells == "clipped":  # layer 1 (no residual) is ELMo's clipped projection
        assert np.abs(expected[:, 1]).max() == pytest.approx(0.4)
    backbone.save_allennlp(tmp_path / "w.hdf5", tmp_path / "o.json")
    names = []
    with h5py.File(tmp_path / "w.hdf5", "r") as f:
        f.visit(names.append)
    assert any(n.endswith("W_P_0") for n in names) == (cells == "clipped")
    lstm = json.loads((tmp_path / "o.json").read_text())["lstm"]
    assert lstm.get("projection", True) == (cells == "clipped")
    assert (lstm.get("cell_clip"), lstm.get("proj_clip")) == (
        (0.5, 0.4) if cells == "clipped" else (None, None))
    restored = load_backbone(tmp_path / "o.json", tmp_path / "w.hdf5")
    np.testing.assert_array_equal(restored(ids)["layers"], expected)
    backbone.save(tmp_path / "b.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "b.keras")(ids)["layers"],
                                  expected)
    with pytest.raises(ValueError, match="cells without projection"):
        dataclasses.replace(base, lstm_projection=False)  # P != C


def test_clear_errors_for_mixed_up_families(tmp_path):
    from elmo_tf.models import load_backbone
    from elmo_tf.recipes.recipe import Recipe

    with pytest.raises(ValueError, match="masks_per_sentence is the 'masked_lm' objective's; "
                                         "leave it out of a 'bilm' recipe"):
        Recipe.from_dict({"base": "tiny", "masks_per_sentence": 2})
    with pytest.raises(ValueError, match="stream batches take 1"):
        Recipe.from_dict({"base": "tiny_masked", "mode": "stream", "masks_per_sentence": 2})
    with pytest.raises(ValueError, match="the 'masked_lm' objective trains the masked_elmo "
                                         "family, whose model is a MaskedElmoConfig; got a "
                                         "ElmoConfig"):
        Recipe.from_dict({"base": "tiny_masked", "model": "tiny"})
    masked = _tiny_backbone()
    with pytest.raises(TypeError, match="fully_bidirectional"):  # not ELMo's field
        ElmoConfig(**{**masked.config.to_dict(), "fully_bidirectional": True})
    with pytest.raises(ValueError, match="ElmoBackbone takes a ElmoConfig; got a "
                                         "MaskedElmoConfig"):
        ElmoBackbone(masked.config)
    # ELMo configs are written as 0.1 wrote them (its .keras files read them).
    assert "fully_bidirectional" not in ElmoConfig.from_architecture("tiny").to_dict()
    masked.save_allennlp(tmp_path / "w.hdf5", tmp_path / "o.json")
    with pytest.raises(ValueError, match="Masked ELMo.s calls are stateless"):
        load_backbone(tmp_path / "o.json", tmp_path / "w.hdf5", stateful=True)
    with pytest.raises(ValueError, match=r"missing keys \['fully_bidirectional'\].*"
                                         r"MaskedElmoConfig's; the options of another model "
                                         r"family\? elmo_tf.models.load_backbone"):
        ElmoBackbone(ElmoConfig.from_preset("tiny")).save_allennlp(
            tmp_path / "e.hdf5", tmp_path / "e.json") or MaskedElmoBackbone.from_allennlp(
            tmp_path / "e.json", tmp_path / "e.hdf5")
