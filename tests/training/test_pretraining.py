"""train / evaluate in one process: the loss falls, the outputs are the released layout, bad
input gives clear errors."""

import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import cli
from elmo_tf.data.generated_corpus import write_generated_corpus
from elmo_tf.text.vocabulary import Vocabulary
from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf import training
from elmo_tf.recipes.recipe import Recipe
from elmo_tf.training.pretraining import checkpoint_plan
from tests.training import MODEL as MODEL_OPTIONS

MODEL = ElmoConfig.from_options(MODEL_OPTIONS)
RECIPE = Recipe("test", MODEL, mode="sentence", batch_size=16, dropout=0.0, epochs=1,
                learning_rate=1.0)  # fast enough to show learning in 60 steps


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_generated_corpus(tmp_path_factory.mktemp("corpus"), n_sentences=600,
                                  n_heldout=100, n_shards=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus):
    output = str(tmp_path_factory.mktemp("run"))
    results = training.train(RECIPE, corpus["train"], output, steps=60, checkpoint_every=60,
                             validation=corpus["heldout"], verbose=0)
    return output, results


@pytest.fixture(scope="module")
def evaluated(trained, corpus):
    """`evaluate` of the trained run on its held-out sentences."""
    return training.evaluate(trained[0], corpus["heldout"])


def test_training_lowers_the_held_out_perplexity(trained, corpus):
    output, results = trained
    vocabulary = Vocabulary.load(f"{output}/vocab.txt")
    untrained = training.build_language_model(RECIPE, len(vocabulary))
    before = training.evaluate_language_model(
        untrained, corpus["heldout"], vocabulary, RECIPE, {"tokenizer": "whitespace"})
    after = results["validation"]
    assert after["perplexity"] < 0.6 * before["perplexity"], (before, after)
    assert results["steps"] == 60
    assert results["train"]["loss"] < np.log(len(vocabulary))
    import json

    record = json.loads(open(f"{output}/run.json").read())
    assert record["steps"] == 60 and "minutes" not in record  # what ran, not the recipe's epochs
    # Its speed, recorded by the run (StepTimes): 60 steps timed, the steady ones faster than
    # the first (which traced the step), at the tokens per step of the corpus read.
    speed = record["speed"]
    assert speed["steps"] == 60 and 0 < speed["steady_seconds_per_step"] < speed[
        "first_step_seconds"]
    tokens_per_step = record["corpus_size"]["tokens"] / record["steps_per_epoch"]
    assert speed["tokens_per_second"] == pytest.approx(
        tokens_per_step / speed["steady_seconds_per_step"], rel=1e-3)


def test_the_loss_is_the_cross_entropy_whose_exponential_is_the_perplexity(trained,
                                                                            evaluated):
    """`val_loss`, `evaluate`'s `loss` and the training `loss` weigh each batch by its tokens:
    on held-out sentence batches of every length (padded, a short last batch) exp(loss) is the
    perplexity beside it. Weighed by rows, as Keras's steps weigh them, they were 0.33 nats
    apart on a run of the built-in corpus."""
    _, results = trained
    for logs in (results["validation"], results["train"], evaluated):  # full softmax, no dropout
        assert np.exp(logs["loss"]) == pytest.approx(logs["perplexity"], rel=1e-5), logs


def test_a_recipe_with_steps_trains_them_by_default_and_its_runs_resume_under_any(corpus,
                                                                                  tmp_path):
    """A recipe's `steps` is its runs' default length, whatever the corpus; it is not a
    setting that a resumed run must repeat (the CPU recipes gained it: their earlier runs
    resume)."""
    import dataclasses
    import json

    output = str(tmp_path / "run")
    record = f"{output}/run.json"
    results = training.train(dataclasses.replace(RECIPE, steps=7), corpus["train"], output,
                             checkpoint_every=7, verbose=0)
    assert results["steps"] == 7 and json.loads(open(record).read())["steps"] == 7
    assert json.loads(open(record).read())["steps_per_epoch"] > 7  # less than an epoch
    # The same command with a recipe of other steps, or none: the run's own 7 (no refusal).
    for recipe in (RECIPE, dataclasses.replace(RECIPE, steps=50)):
        assert training.train(recipe, corpus["train"], output, verbose=0)["steps"] == 7
    # A run from before recipes had steps (none recorded) goes on with its recipe's epochs.
    old = json.loads(open(record).read())
    del old["steps"]
    with open(record, "w") as f:
        json.dump(old, f)
    again = training.train(dataclasses.replace(RECIPE, steps=7), corpus["train"], output,
                           checkpoint_every=7, verbose=0)
    assert again["steps"] >= RECIPE.epochs * old["steps_per_epoch"] > 7


def test_a_time_budget_trains_for_its_minutes_in_all_and_a_larger_one_goes_on(corpus, tmp_path,
                                                                              caplog, capsys):
    """`minutes`: the run stops once that much of `fit` has passed (checkpointed where it
    stops, the seconds recorded), a rerun of a spent budget trains nothing (a rerun without
    a length keeps the budget: not the recipe's epochs), and a larger budget resumes with what
    is left of it; its progress names the budget, not the bound on intervals `fit` is given."""
    import json
    import logging

    output = tmp_path / "run"
    first = training.train(RECIPE, corpus["train"], str(output), minutes=0.1,
                           checkpoint_every=1000, verbose=0)
    record = json.loads((output / "run.json").read_text())
    assert record["minutes"] == 0.1 and 6.0 <= record["trained_seconds"] < 60
    # Too short a budget for XLA's compilation to pay off on CPUs (`xla_pays_off_on_cpus`).
    assert record["xla_compiled"] is bool(tf.config.list_logical_devices("GPU"))
    assert first["steps"] >= 1 and first["trained_minutes"] == pytest.approx(
        record["trained_seconds"] / 60, abs=0.01)
    checkpoints = sorted(os.listdir(output / "checkpoints"))
    assert checkpoints[-1] == f"ckpt-{first['steps']:09d}.weights.h5"  # where it stopped
    with caplog.at_level(logging.INFO, logger="elmo_tf"):
        again = training.train(RECIPE, corpus["train"], str(output), verbose=0)
    assert again["steps"] == first["steps"] and "already trained its 0.1 minutes" in caplog.text
    # Each `train` says once which files its corpus glob matched (a second one in the same
    # process too), not once per pass over them.
    assert caplog.text.count(f"file(s) matching {corpus['train']}") == 1, caplog.text
    kept = json.loads((output / "run.json").read_text())  # its budget and seconds, as they were
    assert (kept["minutes"], kept["trained_seconds"]) == (0.1, record["trained_seconds"])
    assert "steps" not in kept
    # 9 s more than the first run trained (on a loaded machine its first step alone can take
    # more than a fixed larger budget: then nothing would be left of it).
    larger = record["trained_seconds"] / 60 + 0.15
    capsys.readouterr()
    more = training.train(RECIPE, corpus["train"], str(output), minutes=larger,
                          checkpoint_every=1000, verbose=2)
    assert more["steps"] > first["steps"]
    printed = capsys.readouterr().out
    interval = first["steps"] // 1000 + 1  # (1000 steps between checkpoints)
    assert f"Epoch {interval} (a {larger:g}-minute budget)" in printed, printed
    assert not re.search(r"Epoch \d+/", printed), printed
    assert json.loads((output / "run.json").read_text())["trained_seconds"] >= larger * 60 - 0.05
    with pytest.raises(ValueError, match="one of epochs, steps and minutes"):
        training.train(RECIPE, corpus["train"], str(output), minutes=1, steps=5)
    with pytest.raises(ValueError, match="minutes must be a positive number"):
        training.train(RECIPE, corpus["train"], str(output), minutes=0)
    # (and steps or epochs, a run's total, whole numbers above 0, as run.json records them)
    for length in ({"steps": 2.5}, {"steps": 0}, {"epochs": 1.0}, {"epochs": True}):
        with pytest.raises(ValueError, match=f"{next(iter(length))} must be a positive integer"):
            training.train(RECIPE, corpus["train"], str(tmp_path / "other"), **length)
        assert not (tmp_path / "other").exists()


def test_a_decaying_rate_trains_to_its_decay_steps_and_no_further(corpus, tmp_path):
    """A recipe whose learning rate decays to zero at `decay_steps` trains up to that many
    steps; a longer run, or a time budget, is refused before anything is written."""
    import dataclasses

    recipe = dataclasses.replace(RECIPE, warmup_steps=2, decay_steps=6)
    output = tmp_path / "run"
    # {}: the recipe's epochs, > 6 steps; and a recipe's default steps past its decay.
    for recipe, kwargs in ((recipe, {"steps": 7}), (recipe, {"minutes": 1}), (recipe, {}),
                           (dataclasses.replace(recipe, steps=8), {})):
        with pytest.raises(ValueError, match="decays its learning rate to zero at step 6"):
            training.train(recipe, corpus["train"], str(output), verbose=0, **kwargs)
        assert not output.exists()
    # A recipe whose default steps pass its decay trains the steps asked.
    recipe = dataclasses.replace(RECIPE, warmup_steps=2, decay_steps=6, steps=8)
    assert training.train(recipe, corpus["train"], str(output), steps=6, checkpoint_every=3,
                          verbose=0)["steps"] == 6
    recorded = json.loads((output / "run.json").read_text())["settings"]["recipe"]
    assert (recorded["warmup_steps"], recorded["decay_steps"]) == (2, 6)


def test_a_time_budget_is_refused_under_multi_worker_training(corpus, tmp_path, monkeypatch):
    """Each worker's clock would stop it at another step, the others waiting in a collective."""
    from elmo_tf.training import pretraining

    monkeypatch.setattr(pretraining, "is_multi_worker", lambda strategy: True)
    with pytest.raises(ValueError, match="minutes .* is for one worker"):
        training.train(RECIPE, corpus["train"], str(tmp_path / "run"), minutes=1)
    assert not (tmp_path / "run").exists()
    # Nor a run given minutes by one worker, resumed by several with no length (which would
    # otherwise go on with its minutes).
    monkeypatch.setattr(pretraining.RunDirectory, "check_settings",
                        lambda self, settings, _: {"settings": settings, "minutes": 0.5,
                                                   "corpus_size": {"sentences": 9, "tokens": 90}})
    with pytest.raises(ValueError, match=r"trained for --minutes 0\.5, .* for one worker"):
        training.train(RECIPE, corpus["train"], str(tmp_path / "run"))
    assert not (tmp_path / "run" / "run.json").exists()


DAMAGED_RECORDS = [  # (a field's damage, the words the refusal names)
    ({"minutes": "30"}, '"minutes" is \'30\''), ({"minutes": 0}, '"minutes" is 0'),
    ({"minutes": float("nan")}, '"minutes" is nan'), ({"steps": 2.5}, '"steps" is 2.5'),
    ({"steps": True}, '"steps" is True'), ({"steps": None}, '"steps" is None'),
    ({"trained_seconds": -1.0}, '"trained_seconds" is -1.0'), ({"xla": "yes"}, '"xla" is \'yes\''),
    ({"corpus_size": None}, '"corpus_size" is None'),
    ({"corpus_size": {"sentences": 3}}, '"corpus_size.tokens" is missing'),
    ({"settings": {"recipe": {}}}, '"settings.tokenizer" is missing'),
    ({"best_perplexity": "low"}, '"best_perplexity" is \'low\''),
    ({"settings": ["x"]}, "not a run's record"), (None, "not a run's record"),
]


@pytest.mark.parametrize("damage, named", DAMAGED_RECORDS)
def test_a_damaged_run_record_is_refused_by_name_and_left_as_it_is(corpus, tmp_path, damage,
                                                                   named):
    """A run.json edited by hand or damaged: `train` (resuming) and `evaluate` refuse it with a
    ValueError naming the file and the field, before anything is written, not a TypeError deep
    in the run."""
    from elmo_tf.data.corpus import corpus_identity
    from elmo_tf.training.run_directory import recipe_settings

    settings = {"recipe": recipe_settings(RECIPE), "corpus": corpus_identity(corpus["train"]),
                "seed": 0, "tokenizer": "whitespace", "mixed_precision": None}
    record = {"settings": settings, "corpus_size": {"sentences": 600, "tokens": 6000},
              "steps_per_epoch": 5, "best_perplexity": None, "xla": "off", "steps": 10}
    record = None if damage is None else {**record, **damage}
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps(record))
    (run / "language_model.weights.h5").write_bytes(b"")  # what evaluate looks for first
    before = sorted(p.name for p in run.iterdir())
    message = re.escape(str(run / "run.json")) + ": .*" + re.escape(named)
    with pytest.raises(ValueError, match=message):
        training.train(RECIPE, corpus["train"], str(run), verbose=0)
    with pytest.raises(ValueError, match=message):
        training.evaluate(str(run), corpus["heldout"])
    assert (run / "run.json").read_text() == json.dumps(record)
    assert sorted(p.name for p in run.iterdir()) == before


def test_tensorboard_logs_have_the_validation_of_every_checkpoint(trained):
    # One 60-step interval: Keras drops an epoch's metrics when its batch logging frequency
    # does not divide the interval (50 did not).
    import glob

    import tensorflow as tf

    output, results = trained
    values = {}
    for path in glob.glob(f"{output}/logs/validation/*"):
        for raw in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            for value in event.summary.value:
                values[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
    assert values[("epoch_perplexity", 0)] == pytest.approx(
        results["validation"]["perplexity"], rel=1e-5)


def test_outputs_are_the_released_layout_and_reload_identically(trained):
    output, _ = trained
    vocabulary = Vocabulary.load(f"{output}/vocab.txt")
    assert vocabulary.tokens[:3] == ["<S>", "</S>", "<UNK>"]
    options = json.load(open(f"{output}/options.json"))
    assert options["n_tokens_vocab"] == len(vocabulary) and options["lstm"]["dim"] == 16
    assert options["n_train_tokens"] > 0 and options["unroll_steps"] == RECIPE.window
    lm = training.build_language_model(RECIPE, len(vocabulary))
    lm.load_weights(f"{output}/language_model.weights.h5")
    released = ElmoBackbone.from_allennlp(f"{output}/options.json", f"{output}/weights.hdf5")
    ids = np.random.default_rng(0).integers(1, 262, size=(2, 5, 50)).astype("int32")
    ids[1, 3:] = 0
    for key in ("layers", "mask"):
        np.testing.assert_array_equal(released.embed(ids)[key], lm.backbone.embed(ids)[key])


def test_evaluate_reports_the_full_softmax_perplexities(trained, evaluated):
    _, results = trained
    for key in ("forward_perplexity", "backward_perplexity", "perplexity"):
        np.testing.assert_allclose(evaluated[key], results["validation"][key], rtol=1e-4)
    assert evaluated["average_perplexity"] == pytest.approx(
        0.5 * (evaluated["forward_perplexity"] + evaluated["backward_perplexity"]))


def test_a_run_stopped_by_a_nan_loss_writes_no_checkpoint(tmp_path):
    # TerminateOnNaN stops fit, which still ends the epoch: the last good checkpoint must stay
    # the newest, the one a restart resumes from.
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    checkpoint = training.checkpoints.Checkpoint(str(tmp_path))
    checkpoint.set_model(model)
    checkpoint.on_epoch_end(0, {"loss": 1.0})
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt-000000000.weights.h5"]
    model.fit(np.ones((1, 2)), np.ones((1, 1)), verbose=0)  # step 1
    model.stop_training = True  # what TerminateOnNaN sets
    checkpoint.on_epoch_end(1, {"loss": float("nan")})
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt-000000000.weights.h5"]


def _run_cli(capsys, *argv):
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def _cli_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_bad_input_gives_clear_errors(tmp_path, capsys, corpus):
    output = str(tmp_path / "out")
    assert "unknown recipe 'tinny'" in _cli_error(
        capsys, "train", "--recipe", "tinny", "--corpus", "builtin", "--output", output)
    assert "no corpus file matches" in _cli_error(
        capsys, "train", "--recipe", "tiny", "--corpus", str(tmp_path / "none*"), "--output",
        output)
    (tmp_path / "empty.txt").write_text("\n\n")
    assert "empty" in _cli_error(
        capsys, "vocab", "--corpus", str(tmp_path / "empty.txt"), "--output",
        str(tmp_path / "v.txt")).lower()
    (tmp_path / "vocab.txt").write_text("the\ncat\n")
    message = _cli_error(capsys, "train", "--recipe", "tiny", "--corpus", corpus["train"],
                         "--vocab", str(tmp_path / "vocab.txt"), "--output", output)
    assert "<S>" in message and "vocab.txt" in message
    assert "not a finished training run" in _cli_error(
        capsys, "evaluate", "--model", str(tmp_path), "--corpus", corpus["heldout"])
    assert f"{tmp_path / 'nodir'}: no such directory" in _cli_error(
        capsys, "evaluate", "--model", str(tmp_path / "nodir"), "--corpus", corpus["heldout"])
    (tmp_path / "file.txt").write_text("")
    for path in (str(tmp_path / "file.txt"), f"{tmp_path / 'file.txt'}/"):
        assert f"{path} is a file: a run's output is a directory" in _cli_error(
            capsys, "train", "--recipe", "tiny", "--corpus", corpus["train"], "--output", path)
    assert f"{tmp_path / 'missing.json'}: no such file" in _cli_error(
        capsys, "train", "--recipe", str(tmp_path / "missing.json"), "--corpus",
        corpus["train"], "--output", str(tmp_path / "never"))
    # A fine-tuning run's directory, named as such (not as a damaged pre-training record).
    finetuned = tmp_path / "finetuned"
    finetuned.mkdir()
    (finetuned / "run.json").write_text('{"settings": {"task": "classify"}}')
    for command in (["train", "--recipe", "tiny", "--corpus", corpus["train"], "--output"],
                    ["evaluate", "--corpus", corpus["heldout"], "--model"]):
        assert (f"{finetuned} holds a run of `elmo-tf finetune` (its run.json), not of "
                "`elmo-tf train`: give another directory." in _cli_error(
                    capsys, *command, str(finetuned)))
    assert os.listdir(finetuned) == ["run.json"]


def test_vocab_command_writes_the_frequency_sorted_file(tmp_path, capsys, corpus):
    cli.main(["vocab", "--corpus", corpus["train"], "--output", str(tmp_path / "vocab.txt"),
              "--min-count", "2"])
    tokens = Vocabulary.load(tmp_path / "vocab.txt").tokens
    counts = {}
    import glob
    for path in glob.glob(corpus["train"]):
        for line in open(path, encoding="utf-8"):
            for token in line.split():
                counts[token] = counts.get(token, 0) + 1
    expected = sorted((t for t, c in counts.items() if c >= 2), key=lambda t: (-counts[t], t))
    assert tokens == ["<S>", "</S>", "<UNK>"] + expected


def test_a_masked_elmo_recipe_trains_evaluates_and_dumps(tmp_path, corpus, capsys):
    # (`export` of a Masked ELMo backbone: tests/models/masked_elmo.)
    import h5py

    from elmo_tf.models import MaskedElmoBackbone, load_backbone

    recipe = Recipe.from_dict({"base": "tiny_masked", "batch_size": 16, "masks_per_sentence": 2,
                               "model": {**MODEL_OPTIONS, "lstm": {
                                   **{k: v for k, v in MODEL_OPTIONS["lstm"].items()
                                      if k not in ("cell_clip", "proj_clip")},
                                   "fully_bidirectional": True}}})
    output = str(tmp_path / "run")
    results = training.train(recipe, corpus["train"], output, steps=20,
                             validation=corpus["heldout"], verbose=0)
    assert results["steps"] == 20 and "best_perplexity" not in results
    assert set(results["validation"]) == {"loss", "perplexity"}
    vocabulary = Vocabulary.load(f"{output}/vocab.txt")
    before = training.evaluate_language_model(
        training.build_language_model(recipe, len(vocabulary)), corpus["heldout"], vocabulary,
        recipe, {"tokenizer": "whitespace"})
    assert results["validation"]["perplexity"] < 0.8 * before["perplexity"], before
    # The held-out masking is the same in every evaluation (seed 0): evaluate repeats it.
    evaluated = training.evaluate(output, corpus["heldout"])
    np.testing.assert_allclose(evaluated["perplexity"], results["validation"]["perplexity"],
                               rtol=1e-4)
    # run.json counts what a step reads and teaches: 2 copies of every sentence, 15 % of each
    # copy's words selected, so 2 words read and 0.3 predictions per word of the corpus.
    record = json.load(open(f"{output}/run.json"))
    words_per_step = record["corpus_size"]["tokens"] / record["steps_per_epoch"]
    assert record["tokens_per_step"] == pytest.approx(2 * words_per_step, rel=1e-4)
    assert record["supervised_predictions_per_step"] == pytest.approx(0.3 * words_per_step,
                                                                      rel=1e-3)
    options = json.load(open(f"{output}/options.json"))
    assert options["lstm"]["fully_bidirectional"] is True and "cell_clip" not in options["lstm"]
    backbone = load_backbone(f"{output}/options.json", f"{output}/weights.hdf5")
    assert isinstance(backbone, MaskedElmoBackbone)
    lm = training.build_language_model(recipe, len(vocabulary))
    lm.load_weights(f"{output}/language_model.weights.h5")
    ids = np.random.default_rng(0).integers(1, 262, size=(2, 5, 50)).astype("int32")
    np.testing.assert_array_equal(backbone.embed(ids)["layers"], lm.backbone.embed(ids)["layers"])
    (tmp_path / "s.txt").write_text("the dog barks .\nthe cat\n")
    assert cli.main(["dump", "--model", output, str(tmp_path / "s.txt"),
                     str(tmp_path / "v.hdf5")]) == 0
    with h5py.File(tmp_path / "v.hdf5", "r") as f:
        assert f["0"].shape == (3, 4, 2 * MODEL.projection_dim)
    assert "masked-LM perplexity" in _run_cli(capsys, "evaluate", "--model", output,
                                              "--corpus", corpus["heldout"])


@pytest.mark.parametrize("total", [1, 7, 10, 12, 40, 1001])
@pytest.mark.parametrize("every", [1, 3, 4, 40, 1000])
def test_the_checkpoint_plan_trains_the_asked_total_from_any_step(total, every):
    """`--steps` is a total: from any step a run was killed at, or any total it is resumed with,
    the plan ends at the asked total or past it by less than one step per interval, with
    intervals no longer than asked; a run resumed at one of its own checkpoints keeps its plan,
    so it takes the steps an uninterrupted run takes."""
    first, epochs, interval = checkpoint_plan(total, every)
    assert first == 0 and interval <= every
    assert total <= epochs * interval < total + epochs
    grid = [k * interval for k in range(epochs + 1)]
    for done in range(0, total + 3):
        start, end, length = checkpoint_plan(total, every, done)
        trained = (end - start) * length
        if done >= total:
            assert trained == 0
            continue
        assert length <= every and start >= 0 and done + trained >= total
        if done in grid:  # one of this plan's checkpoints: the rest of the same plan
            assert (start, end, length) == (done // interval, epochs, interval)
        else:  # the steps left, planned anew
            assert done + trained < total + (end - start)
