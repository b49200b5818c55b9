"""`elmo-tf finetune` and `predict` on small files written here: a classifier, a sentence-pair
model on GLUE-layout files, a tagger on CoNLL files; early stopping and resuming."""

import errno
import json
import logging
import math
import os
import types
import warnings

import h5py
import keras_hub
import numpy as np
import pytest

from elmo_tf import cli
from elmo_tf.training import finetuning
from elmo_tf.training.finetuning import load_task_model, predict
from tests import subprocesses
from tests.conftest import keras_sees_a_gpu
from tests.training import h5_values

GOOD = ["a good film", "good fun", "so good", "good and fine", "very good", "good ."]
BAD = ["a bad film", "bad fun", "so bad", "bad and dull", "very bad", "bad ."]


@pytest.fixture(scope="module")
def bilm(tmp_path_factory):
    path = tmp_path_factory.mktemp("bilm") / "tiny"
    assert cli.main(["init", "--preset", "tiny", "--output", str(path)]) == 0
    return str(path)


def test_the_tokenizer_defaults_to_the_one_the_bilm_was_pre_trained_with(tmp_path):
    """A biLM `train` wrote records its corpus's tokenizer in run.json: fine-tuning splits text
    the same way unless told otherwise; a model without a run (released files) splits on
    whitespace."""
    assert finetuning._pretraining_tokenizer(str(tmp_path)) == "whitespace"
    (tmp_path / "run.json").write_text(json.dumps({"settings": {"tokenizer": "wordpunct"}}))
    assert finetuning._pretraining_tokenizer(str(tmp_path)) == "wordpunct"


def _finetune(capsys, *args):
    assert cli.main(["finetune", "--encoder-units", "8", "--batch-size", "4", "--dropout", "0",
                     "--learning-rate", "0.01", *args]) == 0
    return capsys.readouterr().out


def _predict(capsys, output, lines, tmp_path, *flags):
    path = tmp_path / "input.txt"
    path.write_text("\n".join(lines) + "\n")
    assert cli.main(["predict", "--model", str(output), str(path), *flags]) == 0
    return capsys.readouterr().out.splitlines()


def _preset_weights(path):
    """{file/dataset path: array} of the weights in a task preset directory."""
    return {f"{name}/{key}": value for name in ("task.weights.h5", "model.weights.h5")
            for key, value in h5_values(path / name).items()}


def test_a_classifier_fine_tunes_resumes_and_predicts(bilm, tmp_path, capsys):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("".join(f"pos\t{t}\n" for t in GOOD) + "".join(f"neg\t{t}\n" for t in BAD))
    dev.write_text("pos\tgood stuff\nneg\tbad stuff\n")
    # Dropout on: a resumed run must draw what the uninterrupted one drew.
    common = ["--task", "classify", "--train", str(train), "--dev", str(dev), "--model", bilm,
              "--dropout", "0.3"]
    out = _finetune(capsys, *common, "--output", str(tmp_path / "whole"), "--epochs", "6")
    assert "best epoch" in out and "dev accuracy" in out and "f1 (of 'pos')" in out
    whole = json.loads((tmp_path / "whole" / "dev_metrics.json").read_text())
    assert any(name.startswith("events.out.tfevents") for _, _, names in
               os.walk(tmp_path / "whole" / "logs") for name in names)  # TensorBoard's
    assert set(whole["dev"]) == {"accuracy", "f1"} and whole["epochs"] <= 6
    assert whole["f1_label"] == "pos"  # the F1's class: label id 1, the labels sorted
    # By default a classifier has its bag of task-trained word embeddings (64), recorded.
    settings = json.loads((tmp_path / "whole" / "run.json").read_text())["settings"]
    assert settings["word_embedding_dim"] == 64
    # The same run in two parts (3 epochs, then 6 in all) ends where the whole one did.
    _finetune(capsys, *common, "--output", str(tmp_path / "parts"), "--epochs", "3")
    _finetune(capsys, *common, "--output", str(tmp_path / "parts"), "--epochs", "6")
    record = json.loads((tmp_path / "parts" / "run.json").read_text())
    whole_record = json.loads((tmp_path / "whole" / "run.json").read_text())
    assert len(record["epochs"]) == len(whole_record["epochs"])
    for a, b in zip(record["epochs"], whole_record["epochs"]):
        assert a == pytest.approx(b, abs=1e-6)
    last = f"checkpoints/epoch-{len(record['epochs']):03d}.weights.h5"
    parts = h5_values(tmp_path / "parts" / last)
    whole_weights = h5_values(tmp_path / "whole" / last)
    assert parts.keys() == whole_weights.keys()
    for key, value in whole_weights.items():
        np.testing.assert_allclose(parts[key], value, atol=1e-6, err_msg=key)
    # Its best epoch's model too, though the first part ended (its best weights then in its
    # task preset alone) before the second went on.
    best = {run: _preset_weights(tmp_path / run) for run in ("parts", "whole")}
    assert best["parts"].keys() == best["whole"].keys()
    for key, value in best["whole"].items():
        np.testing.assert_allclose(best["parts"][key], value, atol=1e-6, err_msg=key)
    lines = _predict(capsys, tmp_path / "whole", ["good good", "bad bad", "good"], tmp_path)
    assert len(lines) == 3 and set(lines) <= {"pos", "neg"}
    # With --scores: the label, then every class's probability (training's label order).
    scored = _predict(capsys, tmp_path / "whole", ["good good", "bad bad", "good"], tmp_path,
                      "--scores")
    for line, label in zip(scored, lines):
        fields = line.split("\t")
        probabilities = dict(field.split("=") for field in fields[1:])
        assert fields[0] == label and sorted(probabilities) == ["neg", "pos"]
        assert sum(map(float, probabilities.values())) == pytest.approx(1, abs=1e-3)
        assert max(probabilities, key=lambda k: float(probabilities[k])) == label
    # `export` on a fine-tuning run writes the task model's SavedModel: the same predictions.
    assert cli.main(["export", "--model", str(tmp_path / "whole"), "--output",
                     str(tmp_path / "serving")]) == 0
    import tensorflow as tf

    served = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures["serving_default"]
    labels = served(text=tf.constant(["good good", "bad bad", "good"]))["label"].numpy()
    assert [label.decode() for label in labels] == lines
    # Another setting in the same directory is refused, naming it.
    with pytest.raises(SystemExit):
        _finetune(capsys, *common, "--output", str(tmp_path / "whole"), "--seed", "1")
    assert "holds another run (run.json differs: seed: 0 then, 1 now)" in capsys.readouterr().err


def test_early_stopping_keeps_the_best_epoch_and_scores_a_test_file_it_never_chose_on(
        bilm, tmp_path, capsys, caplog):
    train, dev, test = tmp_path / "train.tsv", tmp_path / "dev.tsv", tmp_path / "test.tsv"
    train.write_text("".join(f"pos\t{t}\n" for t in GOOD) + "".join(f"neg\t{t}\n" for t in BAD))
    dev.write_text("neg\tgood stuff\npos\tbad stuff\n")  # the opposite: dev gets worse
    test.write_text("pos\tgood good\nneg\tbad bad\npos\tfine and good\nneg\tdull\n")
    out = _finetune(capsys, "--task", "classify", "--train", str(train), "--dev", str(dev),
                    "--test", str(test), "--model", bilm, "--output", str(tmp_path / "run"),
                    "--epochs", "8", "--patience", "2")
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    history = [e["accuracy"] for e in record["epochs"]]
    best = int(np.argmax(history))
    assert len(history) < 8 or best >= 6  # stopped early unless it kept improving
    assert len(history) - 1 - best <= 2
    results = json.loads((tmp_path / "run" / "dev_metrics.json").read_text())
    assert results["best_epoch"] == best + 1 and results["dev"]["accuracy"] == history[best]
    assert results["dev_last_epoch"]["accuracy"] == history[-1]
    assert "test" not in record["settings"]["data"]  # scored, not a setting of the run
    # The test scores: the best dev epoch's model (its preset) and the last epoch's weights
    # (its checkpoint), each predicting the test file here.
    gold = ["pos", "neg", "pos", "neg"]
    texts = ["good good", "bad bad", "fine and good", "dull"]
    model = load_task_model(tmp_path / "run")
    expected = np.mean([p == g for p, g in zip(predict(model, texts), gold)])
    assert results["test"]["accuracy"] == pytest.approx(expected)
    model.load_weights(tmp_path / "run" / "checkpoints" / f"epoch-{len(history):03d}.weights.h5")
    expected_last = np.mean([p == g for p, g in zip(predict(model, texts), gold)])
    assert results["test_last_epoch"]["accuracy"] == pytest.approx(expected_last)
    assert f"test (best dev epoch): accuracy {expected:.4f}" in out
    # Ended, the run keeps one copy of the best weights, without optimizer state (a KerasHub
    # task preset, which loads uncompiled and without warnings), and the last checkpoint
    # (which has it).
    names = os.listdir(tmp_path / "run")
    assert {"task.json", "task.weights.h5", "config.json", "model.weights.h5",
            "preprocessor.json", "tokenizer.json"} <= set(names)
    assert "model.keras" not in names and "best.weights.h5" not in names
    for name in ("task.weights.h5", "model.weights.h5"):
        with h5py.File(tmp_path / "run" / name, "r") as f:
            assert "optimizer" not in f and "layers" in f, name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = keras_hub.models.TextClassifier.from_preset(str(tmp_path / "run"))
    assert not loaded.compiled and loaded.labels == ["neg", "pos"]
    assert predict(loaded, texts) == predict(load_task_model(tmp_path / "run"), texts)
    assert not [w for w in caught if "optimizer" in str(w.message)]
    checkpoint = tmp_path / "run" / "checkpoints" / f"epoch-{len(history):03d}.weights.h5"
    assert any(name.startswith("optimizer/") for name in h5_values(checkpoint))
    # The same command again: the ended run's scores, from its preset and the checkpoint;
    # it says so (not "resuming").
    with caplog.at_level(logging.INFO, logger="elmo_tf"):
        _finetune(capsys, "--task", "classify", "--train", str(train), "--dev", str(dev),
                  "--test", str(test), "--model", bilm, "--output", str(tmp_path / "run"),
                  "--epochs", "8", "--patience", "2")
    assert f"{tmp_path / 'run'} has already trained ({len(history)} epochs" in caplog.text
    assert "resuming" not in caplog.text
    again = json.loads((tmp_path / "run" / "dev_metrics.json").read_text())
    # (scored by the whole model now, where the run scored on the biLM's outputs computed once)
    assert again.pop("seconds").keys() == {"scoring_and_saving"}
    assert results.pop("seconds").keys() == {"bilm_outputs", "training", "scoring_and_saving"}
    assert (again.pop("scored_on_bilm_outputs"), results.pop("scored_on_bilm_outputs")) == (
        [], ["dev", "test"])
    assert again == results


def test_glue_pairs(bilm, tmp_path, capsys):
    glue = tmp_path / "glue" / "RTE"
    glue.mkdir(parents=True)
    rows = [("a man sleeps", "a person rests", "entailment"),
            ("a dog runs", "a cat sleeps", "not_entailment")] * 4
    text = "index\tsentence1\tsentence2\tlabel\n" + "".join(
        f"{i}\t{a}\t{b}\t{c}\n" for i, (a, b, c) in enumerate(rows))
    (glue / "train.tsv").write_text(text)
    (glue / "dev.tsv").write_text(text)
    out = _finetune(capsys, "--task", "glue/rte", "--data-dir", str(tmp_path / "glue"),
                    "--model", bilm, "--output", str(tmp_path / "rte"), "--epochs", "2")
    assert "dev accuracy" in out
    lines = _predict(capsys, tmp_path / "rte", ["a man sleeps\ta person rests"], tmp_path)
    assert lines[0] in ("entailment", "not_entailment")
    # (A CoNLL tagger: `test_compiled_with_xla_the_same_training_and_scores[tag]`.)


def test_a_header_line_is_skipped_with_header_and_refused_without(bilm, tmp_path, capsys):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("label\tsentence\n" + "".join(f"pos\t{t}\n" for t in GOOD)
                     + "".join(f"neg\t{t}\n" for t in BAD))
    # (A dev file without every training label is fine: it has no 'neg'.)
    dev.write_text("label\tsentence\npos\tgood stuff\npos\tgood fun\n")
    common = ["--task", "classify", "--train", str(train), "--dev", str(dev), "--model", bilm,
              "--epochs", "1"]
    with pytest.raises(SystemExit):
        cli.main(["finetune", *common, "--output", str(tmp_path / "no")])
    assert (f"{train}: its first line ('label', 'sentence') looks like a header: its label is "
            "on no other line, every other label on several. --header skips it") in \
        capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    _finetune(capsys, *common, "--header", "--output", str(tmp_path / "yes"))
    record = json.loads((tmp_path / "yes" / "run.json").read_text())
    assert record["labels"] == ["neg", "pos"] and record["settings"]["header"] is True
    # A first example of a class of its own is no header: its text is a sentence. (The header
    # check comes before the labels are compared, so the dev file's error below, whose
    # training labels hold 'odd', shows that the first line was taken as an example.)
    train.write_text("odd\ta strange film\n" + "".join(f"pos\t{t}\n" for t in GOOD)
                     + "".join(f"neg\t{t}\n" for t in BAD))
    # A header in the dev file alone: the unknown label says where to look.
    dev.write_text("label\tsentence\npos\tgood stuff\n")
    with pytest.raises(SystemExit):
        cli.main(["finetune", *common, "--output", str(tmp_path / "dev")])
    assert "has labels the training file does not have: ['label'] (training labels: " \
        "['neg', 'odd', 'pos']; a header line? --header skips it)" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # CoNLL files have none
        cli.main(["finetune", "--task", "tag", "--train", str(train), "--dev", str(dev),
                  "--model", bilm, "--header", "--output", str(tmp_path / "tag")])
    assert "--header is for labelled-text files (classify, pair)" in capsys.readouterr().err


def test_bad_inputs_are_clear_errors_before_any_model(bilm, tmp_path, capsys):
    train = tmp_path / "train.tsv"
    train.write_text("pos\tgood\nneg\tbad\n")
    (tmp_path / "dev.tsv").write_text("meh\tokay\n")
    # Columns swapped (text<TAB>label, as some datasets ship them): a label a sentence.
    swapped, swapped_pairs = tmp_path / "swapped.tsv", tmp_path / "swapped_pairs.tsv"
    swapped.write_text("".join(f"{t}\t{i % 2}\n" for i, t in enumerate(GOOD + BAD)))
    swapped_pairs.write_text("".join(f"{a}\t{b}\tsame\n" for a, b in zip(GOOD, BAD)))
    for args, message in (
            (["--task", "classify", "--train", str(swapped), "--dev", str(swapped)],
             f"{swapped}: {len(set(GOOD + BAD))} different labels for only 2 different texts "
             f"(labels such as {GOOD[0]!r}, {GOOD[1]!r}): are its columns swapped? Each line "
             "is label<TAB>text, the label first."),
            (["--task", "pair", "--train", str(swapped_pairs), "--dev", str(swapped_pairs)],
             "for only 1 different text (labels such as"),
            (["--task", "classify", "--train", str(train), "--dev", str(tmp_path / "dev.tsv")],
             "has labels the training file does not have: ['meh']"),
            (["--task", "glue/sst2", "--train", str(train)], "reads GLUE's files from --data-dir"),
            (["--task", "classify", "--train", str(train)],
             "task 'classify' needs --dev (the file that picks the best epoch)."),
            (["--task", "tag", "--train", str(train), "--dev", str(train),
              "--word-embedding-dim", "8"], "the task 'tag' has no word features"),
            (["--task", "classify", "--word-embedding-dim", "-1"], "must be an integer >= 0"),
            (["--task", "classify", "--word-embedding-dim", "x"],
             "argument --word-embedding-dim: must be an integer >= 0; got 'x'"),
            (["--task", "classify", "--epochs", "two"],
             "argument --epochs: must be a positive integer; got 'two'")):
        with pytest.raises(SystemExit):
            cli.main(["finetune", *args, "--model", bilm, "--output", str(tmp_path / "x")])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    # An --output that holds a pre-training run (its own biLM's, say): named, and left as it is.
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / "run.json").write_text(json.dumps({"settings": {"recipe": {}, "corpus": "c*"}}))
    conll = tmp_path / "train.conll"
    conll.write_text("a O\ngood B-X\n\nbad O\n")
    for task, data in (("classify", train), ("tag", conll)):  # (refused before the data, after)
        with pytest.raises(SystemExit):
            cli.main(["finetune", "--task", task, "--train", str(data), "--dev", str(data),
                      "--model", bilm, "--output", str(pretrained)])
        assert (f"{pretrained} holds a run of `elmo-tf train` (its run.json), not of `elmo-tf "
                "finetune`: give another directory (the biLM to fine-tune is --model)."
                in capsys.readouterr().err)
    assert os.listdir(pretrained) == ["run.json"]
    # The biLM's own directory (no run: `init`'s, or the released files) as --output: refused,
    # its KerasHub preset not overwritten by the task's.
    before = sorted(os.listdir(bilm))
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--task", "classify", "--train", str(train), "--dev", str(train),
                  "--model", bilm, "--output", bilm])
    assert f"--output {bilm} holds a biLM (options.json)" in capsys.readouterr().err
    assert sorted(os.listdir(bilm)) == before
    # Not swapped: an NLI premise that repeats with three labels (one distinct first text),
    # and a classifier whose few texts are sentences; each passes the columns' check.
    premise = "a man plays a guitar"
    finetuning._check_columns("nli.tsv", [(premise, h) for h in GOOD[:3]],
                              ["entailment", "neutral", "contradiction"])
    finetuning._check_columns("few.tsv", [("a good film",), ("a good film",), ("so bad",)],
                              ["pos", "odd", "neg"])


def test_a_fixed_mix_uses_the_layers_it_names(bilm, tmp_path, capsys):
    import tensorflow as tf

    from elmo_tf.text import tokens_to_char_ids

    train = tmp_path / "train.tsv"
    train.write_text("".join(f"pos\t{t}\n" for t in GOOD) + "".join(f"neg\t{t}\n" for t in BAD))
    _finetune(capsys, "--task", "classify", "--train", str(train), "--dev", str(train),
              "--model", bilm, "--output", str(tmp_path / "layer0"), "--epochs", "1",
              "--scalar-mix-parameters", "1,-9e10,-9e10", "--word-embedding-dim", "0")
    record = json.loads((tmp_path / "layer0" / "run.json").read_text())
    assert record["settings"]["scalar_mix_parameters"] == [1.0, -9e10, -9e10]
    assert "word_embedding_dim" not in record["settings"]  # 0: ELMo alone, as runs before it
    # Such a run (and any recorded before the flag) resumes without it, keeping 0.
    _finetune(capsys, "--task", "classify", "--train", str(train), "--dev", str(train),
              "--model", bilm, "--output", str(tmp_path / "layer0"), "--epochs", "2",
              "--scalar-mix-parameters", "1,-9e10,-9e10")
    record = json.loads((tmp_path / "layer0" / "run.json").read_text())
    assert len(record["epochs"]) == 2 and "word_embedding_dim" not in record["settings"]
    model = load_task_model(tmp_path / "layer0")
    assert "bag_of_words" not in [layer.name for layer in model.layers]
    embedding = model.embedding
    assert not embedding.scalar_mixes[0].trainable_weights
    # The embedding is the biLM's layer 0 (the context-free token representation) exactly.
    tokens = tf.constant([["a", "good", "film"], ["so", "bad", "fun"]])
    layers = embedding.backbone(tokens_to_char_ids(tokens))["layers"]
    np.testing.assert_allclose(embedding(tokens), layers[:, 0], atol=1e-6)
    with pytest.raises(SystemExit):
        _finetune(capsys, "--task", "classify", "--train", str(train), "--dev", str(train),
                  "--model", bilm, "--output", str(tmp_path / "bad"), "--scalar-mix-parameters",
                  "1,x")
    assert "must be numbers separated by commas" in capsys.readouterr().err


@pytest.mark.parametrize("task", ["classify", "tag", "pair"])
def test_compiled_with_xla_the_same_training_and_scores(bilm, tmp_path, capsys, task,
                                                        monkeypatch):
    """`--xla on` (the text read in the input pipeline, the model compiled, features
    padded to buckets) trains the same model as `--xla off`: the same dev scores every epoch
    and the same weights, up to float rounding; predict reads it. (Without dropout: XLA draws
    its random numbers with another algorithm.) Keras's LSTMs see a GPU: compiled, the head's
    BiLSTM runs Keras's own kernel, not cuDNN's (which XLA cannot compile: a GPU's failure).
    Both train on the frozen biLM's outputs computed once (the default). For the pair (two
    texts a row), a third run, whose biLM runs at every step instead (as where its outputs
    would take too much memory), trains the same model again: the same scores and weights,
    and the same test scores (scored on the outputs computed once, or by the whole model).
    (Each task's head on the outputs, the classifier's word features included, and dropout's
    draws through it: `test_the_layers_after_a_frozen_bilm_compute_the_task_on_its_outputs`.)
    The tagger's run prints its span F1 and token accuracy and predicts tags with their
    probabilities; dev batches of different widths."""
    if task == "tag":
        conll = "".join(f"{w} {t}\n" for w, t in (("Peter", "B-PER"), ("runs", "O"))) + "\n" + \
            "".join(f"{w} {t}\n" for w, t in (("Big", "B-ORG"), ("Co", "I-ORG"), ("won", "O")))
        long = "".join(f"{w} O\n" for w in "the big one ran off far away".split())
        (tmp_path / "train.txt").write_text((conll + "\n") * 3 + long)
        (tmp_path / "dev.txt").write_text((conll + "\n") * 3 + long)  # 2 batches, 2 widths
        (tmp_path / "test.txt").write_text("Co O\nruns O\n\nthe O\nbig B-ORG\nPeter I-ORG\n")
        lines = ["Peter runs", "Big Co won today"]
    elif task == "classify":
        (tmp_path / "train.txt").write_text("".join(f"pos\t{t}\n" for t in GOOD)
                                            + "".join(f"neg\t{t}\n" for t in BAD))
        (tmp_path / "dev.txt").write_text("pos\tgood stuff\nneg\tbad stuff and a long tail\n")
        (tmp_path / "test.txt").write_text("neg\tgood but dull\npos\tfun\npos\tso bad\n")
        lines = ["good good", "bad"]
    else:
        (tmp_path / "train.txt").write_text("".join(
            f"{label}\t{a}\t{b}\n" for label, a, b in
            [("same", "a good film", "good fun"), ("other", "a good film", "bad and dull"),
             ("same", "bad fun", "so bad"), ("other", "very good", "bad .")] * 2))
        (tmp_path / "dev.txt").write_text("same\tgood\tgood .\nother\tgood\tbad\n")
        (tmp_path / "test.txt").write_text("other\tso good\tdull film\nsame\tbad\tbad fun\n")
        lines = ["good\tfine", "bad\tgood"]
    runs = {}
    names = ("off", "on", "every_step") if task == "pair" else ("off", "on")
    for name in names:
        if name == "on":
            keras_sees_a_gpu(monkeypatch)  # (a CPU has no cuDNN kernel: not for "off")
        if name == "every_step":
            monkeypatch.setattr(finetuning, "FROZEN_OUTPUTS_BYTES", 0)
        out = _finetune(capsys, "--task", task, "--train", str(tmp_path / "train.txt"),
                        "--dev", str(tmp_path / "dev.txt"), "--test", str(tmp_path / "test.txt"),
                        "--model", bilm, "--epochs", "2", "--patience", "2", "--xla",
                        "on" if name == "on" else "off", "--output", str(tmp_path / name))
        monkeypatch.undo()
        if task == "tag":
            assert "dev span_f1" in out and "token_accuracy" in out
        assert not list((tmp_path / name).glob("bilm_outputs*"))  # its file removed at the end
        with open("/proc/self/maps") as maps:  # and unmapped: its disk space freed
            assert "bilm-outputs-" not in maps.read()
        runs[name] = json.loads((tmp_path / name / "run.json").read_text())
        metrics = json.loads((tmp_path / name / "dev_metrics.json").read_text())
        assert (metrics["xla"], metrics["bilm_outputs_once"]) == (name == "on",
                                                                   name != "every_step")
        assert ("bilm_outputs" in metrics["seconds"]) == (name != "every_step")
        assert metrics["scored_on_bilm_outputs"] == ([] if name == "every_step"
                                                     else ["dev", "test"])
        runs[name]["test"] = metrics["test"]
    for other in names[1:]:  # each against "off"
        for first, second in zip(runs["off"]["epochs"] + [runs["off"]["test"]],
                                 runs[other]["epochs"] + [runs[other]["test"]]):
            assert second == pytest.approx(first, abs=1e-6)
        first, second = (h5_values(tmp_path / name / "checkpoints" / "epoch-002.weights.h5")
                         for name in ("off", other))
        assert first.keys() == second.keys()
        for key, value in first.items():
            np.testing.assert_allclose(second[key], value, atol=1e-4,
                                       err_msg=f"{other}: {key}")
    predicted = _predict(capsys, tmp_path / "on", lines, tmp_path)
    assert predicted == _predict(capsys, tmp_path / "off", lines, tmp_path)
    if task == "tag":
        assert [len(line.split()) for line in predicted] == [2, 4]
        assert set(" ".join(predicted).split()) <= {"B-PER", "B-ORG", "I-ORG", "O"}
        scored = _predict(capsys, tmp_path / "off", lines, tmp_path, "--scores")
        for line, tags in zip(scored, predicted):
            pairs = [token.split("=") for token in line.split()]
            assert [tag for tag, _ in pairs] == tags.split()
            assert all(1 / 4 <= float(p) <= 1 for _, p in pairs)  # the most probable of 4 tags
    # The run records its speed: 2 epochs' seconds (scoring included) and their steps
    # (12, 7 and 8 examples in batches of 4).
    speed = runs["on"]["speed"]
    examples = {"classify": 12, "tag": 7, "pair": 8}[task]
    assert len(speed["epoch_seconds"]) == 2 and speed["steps"] == 2 * math.ceil(examples / 4)
    # Compiled scoring pads a last, smaller batch with empty rows: 5 texts of one bucket in
    # batches of 3 take one compilation, and the logits of the texts are those without XLA.
    model = load_task_model(tmp_path / "on")
    texts = model.parse_lines((lines * 3)[:5])
    finetuning._SCORERS.pop(model, None)
    compiled = finetuning._logits(model, texts, 3, compiled=True)
    assert len(compiled) == len(texts)  # the padding rows left out
    assert finetuning._scorer(model, True).experimental_get_tracing_count() == 1
    for on, off in zip(compiled, finetuning._logits(model, texts, 3)):
        np.testing.assert_allclose(on[:len(off)], off, atol=1e-5)


MIRRORED = """
import sys
from elmo_tf import cli
for xla in ("off", "on"):
    assert cli.main(["finetune", "--strategy", "mirrored", "--cpu-replicas", "2", "--xla", xla,
                     "--output", sys.argv[1] + "-" + xla, *sys.argv[2:]]) == 0
"""


def test_two_mirrored_replicas_fine_tune_as_one(bilm, tmp_path, capsys, monkeypatch):
    """`--strategy mirrored` on 2 logical CPUs (a subprocess: they must be made before
    TensorFlow starts) trains as the default strategy does on the same global batches (each
    split in two equal halves): the same dev scores every epoch, the same weights up to float
    rounding. With XLA too, where the replicas sum their word table's gradient dense: the same
    as one replica whose gradient is dense (Keras's Adam on a row-sparse gradient adds the
    squares of a repeated word's occurrences, not the square of their sum). A dev file of 3
    lines is scored in one place, not split."""
    import sys

    import tensorflow as tf

    from elmo_tf.models.downstream import downstream_task
    from tests.conftest import CPU_ONLY_ENV

    (tmp_path / "train.txt").write_text("".join(f"pos\t{t}\n" for t in GOOD)
                                        + "".join(f"neg\t{t}\n" for t in BAD))
    (tmp_path / "dev.txt").write_text("pos\tgood stuff\nneg\tbad stuff\npos\tso good fun\n")
    common = ["--task", "classify", "--train", str(tmp_path / "train.txt"), "--dev",
              str(tmp_path / "dev.txt"), "--model", bilm, "--epochs", "1",
              "--encoder-units", "8", "--batch-size", "4", "--dropout", "0",
              "--learning-rate", "0.01"]
    done = subprocesses.run([sys.executable, "-c", MIRRORED, str(tmp_path / "mirrored"),
                             *common], capture_output=True, text=True, seconds=900,
                            what="the mirrored finetune",
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__)))),
                          env={**os.environ, **CPU_ONLY_ENV, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "training on 2 replicas, 2 rows each" in done.stderr
    _finetune(capsys, *common, "--xla", "off", "--output", str(tmp_path / "off"))
    # One replica, compiled, its row-sparse gradients summed dense as the replicas' are.
    monkeypatch.setattr(downstream_task.DownstreamTask, "replica_gradients", lambda self, g, v: [
        tf.reshape(tf.convert_to_tensor(x), w.shape) if isinstance(x, tf.IndexedSlices) else x
        for x, w in zip(g, v)])
    _finetune(capsys, *common, "--xla", "on", "--output", str(tmp_path / "on"))
    for xla in ("off", "on"):
        one, two = tmp_path / xla, tmp_path / f"mirrored-{xla}"
        for a, b in zip(*(json.loads((run / "run.json").read_text())["epochs"]
                          for run in (two, one))):
            assert a == pytest.approx(b, abs=1e-6), xla
        weights, replicated = (h5_values(run / "checkpoints" / "epoch-001.weights.h5")
                               for run in (one, two))
        assert replicated.keys() == weights.keys()
        for key, value in weights.items():
            np.testing.assert_allclose(replicated[key], value, atol=1e-4, err_msg=f"{xla} {key}")


def test_a_frozen_bilms_outputs_computed_once_score_as_the_whole_model(bilm, monkeypatch,
                                                                       tmp_path):
    """`_frozen_bilm_outputs` runs the biLM in batches of texts of similar lengths (4 x the
    batch size of 1 here: two biLM batches, sorted), a pair's two inputs apart, an empty text
    among them, and keeps each text's outputs at its length: the task's `FrozenBiLMHead` on
    them (`_with_given`) gives every text the logits of the whole model, in batches of 4,
    uncompiled and compiled (features padded to a length bucket, and a last batch to 4 rows);
    the memory budget decides on the train texts, then adds a scored split's where it fits.
    Where `embed` compiles (a GPU; here its padding alone, on the CPU), the biLM's batches
    take few shapes (4 rows, a power of two of at least 8 tokens), and the outputs are the
    same. Outputs over the memory budget are not computed."""
    import tensorflow as tf

    from elmo_tf import ElmoEmbedding
    from elmo_tf.models.downstream import FrozenBiLMHead, SentencePairClassifier

    embedding = ElmoEmbedding.from_allennlp(os.path.join(bilm, "options.json"),
                                            os.path.join(bilm, "weights.hdf5"), dropout=0.0)
    model = SentencePairClassifier(embedding, labels=["a", "b"], encoder_units=8)
    texts = [("a b c d e f", "x"), ("", "y z"), ("g", ""), ("h i", "j k l"), ("m n o", "p"),
             ("q", "r s t u v w x")]
    given = finetuning._frozen_bilm_outputs(model, {"train": texts}, 1, 0, tmp_path)["train"]
    assert sorted(given) == ["text_a_char_ids", "text_b_char_ids"]
    assert given["text_a_char_ids"].lengths.tolist() == [8, 2, 3, 4, 5, 3]
    head = FrozenBiLMHead(model)
    for compiled in (False, True):
        whole = finetuning._logits(model, texts, 4, compiled)
        once = finetuning._logits(head, texts, 4, compiled, given)
        assert len(once) == len(texts)
        for a, b in zip(whole, once):
            np.testing.assert_allclose(b, a, atol=1e-5)
    shapes, embed = [], model.backbone.embed
    monkeypatch.setattr(model.backbone, "embed",
                        lambda ids: shapes.append(ids.shape) or embed(ids))
    monkeypatch.setattr(type(model.backbone), "embed_compiles", staticmethod(lambda: True))
    padded = finetuning._frozen_bilm_outputs(model, {"train": texts}, 1, 0, tmp_path)["train"]
    # each feature's texts sorted by length, in two batches (its 4 shortest, then its 2 longest
    # and 2 empty rows), each of at most 7 words: 8 tokens
    assert [tuple(s[:2]) for s in shapes] == [(4, 8)] * 4
    for name, a in given.items():
        b = padded[name]
        np.testing.assert_array_equal(a.lengths, b.lengths)
        np.testing.assert_allclose(b.values, a.values, atol=1e-5, err_msg=name)
    for length, padded_length in ((0, 8), (1, 8), (8, 8), (9, 16), (16, 16), (17, 32)):
        assert finetuning._padded_to_few_shapes(tf.ones([3, length, 50], tf.int32), 5).shape \
            == (5, padded_length, 50)
    monkeypatch.undo()
    # The budget: the train texts' outputs or none; a scored split's beside them where the
    # budget still has room.
    train_bytes = sum(o.nbytes for o in given.values())
    test = texts[:3]
    for budget, splits in ((train_bytes - 1, None), (train_bytes, ["train"]),
                           (2 * train_bytes, ["test", "train"])):
        monkeypatch.setattr(finetuning, "FROZEN_OUTPUTS_BYTES", budget)
        outputs = finetuning._frozen_bilm_outputs(model, {"train": texts}, 1, 0, tmp_path,
                                                  {"test": test})
        assert (outputs if outputs is None else sorted(outputs)) == splits
    # ... and at most half the free space of the directory that keeps them
    for free, splits in ((2 * train_bytes - 2, None), (2 * train_bytes, ["train"])):
        monkeypatch.setattr(finetuning.shutil, "disk_usage",
                            lambda path, free=free: types.SimpleNamespace(free=free))
        outputs = finetuning._frozen_bilm_outputs(model, {"train": texts}, 1, 0, tmp_path,
                                                  {"test": test})
        assert (outputs if outputs is None else sorted(outputs)) == splits
    monkeypatch.undo()
    # ... and none where the files' space cannot be taken (a quota): no file left behind
    scratch = tmp_path / "quota"
    scratch.mkdir()

    def quota(fd, offset, size):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(os, "posix_fallocate", quota)
    assert finetuning._frozen_bilm_outputs(model, {"train": texts}, 1, 0, scratch) is None
    assert not list(scratch.iterdir())
    monkeypatch.undo()
    given["text_a_char_ids"].close()
    with pytest.raises(ValueError, match="was closed"):
        given["text_a_char_ids"].texts([0])
