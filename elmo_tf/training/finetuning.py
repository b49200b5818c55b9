"""`finetune` and `predict`: a downstream task model trained on ELMo (or Masked ELMo)
representations, with early stopping on the dev set's own metric, resumably.

A fine-tuning run lives in its output directory:

* `run.json`: the settings, the label names and one entry per finished epoch (its dev metrics);
* `checkpoints/epoch-NNN.weights.h5`: the model and optimizer after the newest epoch (kept
  when the run ends: a larger `epochs` goes on from it, and a test file given later is scored
  with the last epoch's weights too);
* `best.weights.h5`: the weights of the epoch with the best dev score so far (no optimizer
  state), until the run ends;
* `logs/`: TensorBoard's (the training loss and the dev metrics per epoch);
* while it runs, a frozen biLM's outputs of the texts (`FrozenOutputs`), in a temporary
  directory `bilm_outputs.elmo-tf-*.tmp/` removed when `finetune` returns or raises (one a
  killed process left is removed when the run resumes);
* when the run ends (all epochs, or `patience` epochs without a better dev score): the best
  epoch's model as a KerasHub task preset, without optimizer state (`task.json`,
  `task.weights.h5`, the backbone's `config.json`, `model.weights.h5`, `metadata.json`,
  `preprocessor.json`, `tokenizer.json`: `DownstreamTask.save_to_preset`; `predict`,
  `load_task_model`, `DownstreamTask.from_preset` and `keras_hub.models.TextClassifier
  .from_preset` read it), which then replaces best.weights.h5, and `dev_metrics.json` (with a
  `test` file: its scores too, of the best dev epoch and of the last, a test set being scored,
  never chosen on). Runs of earlier versions ended with `model.keras` instead, which still
  loads.

Killed, the same command resumes after the last finished epoch, with the batches and dropout
draws the uninterrupted run would have had (each epoch's depend only on the seed and the
epoch). The directory is a `RunDirectory`, as a pre-training run's is.

Nothing here depends on the task: each downstream task model (`DownstreamTask`, registered by
name) reads its files, builds its inputs and targets and says what its logits mean.
"""

import collections
import contextlib
import logging
import math
import os
import shutil
import time
import weakref
import zipfile

import h5py
import keras
import numpy as np
import tensorflow as tf

from elmo_tf.checks import (MISSING, check_non_negative_int, check_positive_ints,
                             damaged_field, is_whole)
from elmo_tf.data.language_model_dataset import bucket_length
from elmo_tf.data.glue import GLUE_TASKS, read_glue, read_glue_tfds
from elmo_tf.files import readable_size, scratch_directory, write_json_atomically
from elmo_tf.keras_compat import Progress, progress_verbosity, without_optimizer
from elmo_tf.models.compiled_step import use_xla
from elmo_tf.models.downstream import DownstreamTask, FrozenBiLMHead, task_class, task_names
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.ops.padding import char_ids_mask, sequence_lengths
from elmo_tf.training.checkpoints import CheckpointFiles, damage, save_weights_atomically
from elmo_tf.training.distribution import is_multi_worker
from elmo_tf.training.frozen_outputs import FrozenOutputs
from elmo_tf.training.run_directory import RunDirectory
from elmo_tf.training.step_times import StepTimes

logger = logging.getLogger("elmo_tf")

TASKS = task_names() + tuple(f"glue/{name}" for name in GLUE_TASKS)


def finetune(task, model_dir, output, *, data_dir=None, tfds_data_dir=None, train=None,
             dev=None, test=None, header=False, tokenizer=None, epochs=10,
             patience=3, batch_size=32, learning_rate=1e-3, encoder_units=512, dropout=0.5,
             fine_tune_bilm=False, scalar_mix_parameters=None, word_embedding_dim=None, seed=0,
             xla="auto", strategy=None, verbose="auto"):
    """Trains a task model on a pre-trained biLM and keeps the epoch with the best dev score.

    Args:
        task: `"glue/NAME"` (`GLUE_TASKS`: `glue/sst2`, `glue/mnli`, ...; read from
            `data_dir`, GLUE's files, or from `tfds_data_dir`, TFDS's `glue/NAME` prepared
            there), or `"classify"` / `"pair"` (`label<TAB>text[<TAB>text_b]` files) or
            `"tag"` (CoNLL files) read from `train` and `dev`.
        model_dir: the biLM: a directory with `options.json` and `weights.hdf5` (an
            `elmo-tf train` run, or released files), ELMo or Masked ELMo.
        output: the run's directory (see the module docstring).
        data_dir, tfds_data_dir, train, dev: where the data is (see `task`).
        test: a labelled file of the `train` kind (`classify`, `pair`, `tag`), scored when the
            run ends with the best dev epoch's weights (`"test"`) and the last epoch's
            (`"test_last_epoch"`): nothing is chosen on it, and it is not a setting of the run
            (a finished run given one is scored, not trained again).
        header: the `classify` / `pair` files (train, dev, test) start with a header line,
            skipped. Without it, a training file whose first line looks like a header (its
            label on no other line while every other label is on several, its texts one word
            each) is refused.
        tokenizer: how raw text becomes tokens (`"whitespace"` or `"wordpunct"`); by default
            the one the biLM was pre-trained with (its `run.json`), else whitespace. A tagger
            reads CoNLL tokens and always splits on whitespace.
        epochs: passes over the training set, at most, in all: the same command resumes a
            killed run, and a larger `epochs` goes on with a run that used all of its epochs
            (not with one that stopped early).
        patience: epochs without a better dev score before stopping.
        batch_size, learning_rate: Adam's batches and step size.
        encoder_units, dropout: the task model's BiLSTM size and its dropout (the scalar mix's
            dropout too).
        fine_tune_bilm: train the biLM's weights too (by default only the scalar mix and the
            head train).
        scalar_mix_parameters: fixed pre-softmax weights of the biLM's layers (one per layer,
            layer 0 first) instead of a trained mix, as AllenNLP's `Elmo` takes them:
            `[1, -9e10, -9e10]` uses layer 0 alone (the context-free token representation).
        word_embedding_dim: a sentence classifier's bag of task-trained word embeddings
            beside ELMo (`TextClassifier`; `classify` and GLUE's single-sentence tasks): by
            default 64, chosen by measurement (`docs/benchmarks.md`, "Fine-tuning
            defaults"); 0 leaves it out (ELMo alone). Other tasks have none. A run resumed
            without it keeps what it started with.
        seed: initialisation, dropout and batch order.
        xla: compile training and scoring with XLA: `"on"`, `"off"`, or `"auto"` (on where
            the device is a GPU: `use_xla`). The raw text always goes through the model's
            preprocessor in the input pipeline; compiled, each text's features are padded to
            its length's bucket (`bucket_length`, as pre-training's batches): one
            compilation per bucket and batch size. The same model and scores
            (up to float rounding); not a setting of the run (a resumed run may change it).
        strategy: the `tf.distribute` strategy to train under (`make_strategy("mirrored")`,
            made before TensorFlow starts; default: the one in scope): `batch_size` is the
            global batch, split among the replicas; the loss is the mean of the replicas' means
            (the global batch's mean where the replicas' shares are equal, as in every full
            batch of a classifier; a tagger's replicas average their own tokens). Not a
            setting of the run. Multi-worker training is refused: a fine-tuning run is one
            machine's.
        verbose: Keras `fit` verbosity.

    A frozen biLM (the default) gives a text the same outputs at every epoch: they are
    computed once, for the train and dev texts (`Backbone.embed`, with a progress bar), kept
    in a file in the run's directory while it runs (`FrozenOutputs`: memory-mapped, in memory
    as far as it fits), and the layers after the biLM train on them and score them
    (`FrozenBiLMHead`: the same variables, batches, dropout draws and loss; the same model up
    to float rounding), unless they would take more than half the free disk space there or
    `FROZEN_OUTPUTS_BYTES` (64 GiB): the biLM then runs at every step, as it does
    fine-tuned. The test texts' outputs (`SCORED_SPLITS`) are computed
    with them where the budget has room, and the test scored on them; else by the whole
    model.

    Returns:
        `{"dev": {metric: score}, "dev_last_epoch": {...}, "best_epoch": k, "epochs": n,
        "xla": compiled or not, "bilm_outputs_once": whether the run's last epochs trained on
        the frozen biLM's outputs computed once (also in run.json), "output": output,
        "scored_on_bilm_outputs": the splits this process scored on them, "seconds": this
        process's wall seconds per phase (`"bilm_outputs"`, `"training"`:
        `fit` with its dev scoring, `"scoring_and_saving"`: the test scoring and the preset;
        those that ran)}` (plus `"dev_mismatched"` for MNLI, `"test"` and `"test_last_epoch"`
        with `test`, and `"f1_label"`, the class whose F1 `"f1"` is, where it is a metric).

    Example:
    >>> finetune("glue/sst2", "runs/elmo", "runs/sst2", data_dir="glue_data")["dev"]
    {'accuracy': 0.87}
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; accepted: {', '.join(TASKS)}.")
    check_positive_ints(epochs=epochs, patience=patience, batch_size=batch_size,
                        encoder_units=encoder_units)
    cls = _model_class(task)
    strategy = strategy or tf.distribute.get_strategy()
    if is_multi_worker(strategy):
        raise ValueError("finetune runs on one machine: the default strategy or mirrored (its "
                         "GPUs or logical CPUs), not multi-worker.")
    compiled = use_xla(xla, strategy)
    options = dict(cls.finetune_options)
    if word_embedding_dim is not None:
        if "word_embedding_dim" not in options:
            raise ValueError(f"word_embedding_dim (--word-embedding-dim) is for the sentence "
                             f"classifiers (classify, GLUE's single-sentence tasks); the task "
                             f"{task!r} has no word features.")
        check_non_negative_int("word_embedding_dim", word_embedding_dim, "0: ELMo alone")
        options["word_embedding_dim"] = word_embedding_dim
    elif "word_embedding_dim" in options:
        recorded = RunDirectory(output).record(of="finetune")
        if recorded is not None:  # a run resumes as it started (run.json records no 0)
            options["word_embedding_dim"] = recorded["settings"].get("word_embedding_dim", 0)
    # Checked before any model is built.
    data = _read_data(task, cls, data_dir, tfds_data_dir, train, dev, test, header)
    tokenizer = cls.fixed_tokenizer or tokenizer or _pretraining_tokenizer(model_dir)
    settings = {"task": task, "model_dir": os.path.abspath(model_dir),
                "data": {k: os.path.abspath(v) for k, v in
                         (("data_dir", data_dir), ("tfds_data_dir", tfds_data_dir),
                          ("train", train), ("dev", dev)) if v},
                "tokenizer": tokenizer, "patience": patience, "batch_size": batch_size,
                "learning_rate": learning_rate, "encoder_units": encoder_units,
                "dropout": dropout, "fine_tune_bilm": bool(fine_tune_bilm), "seed": seed}
    if header:  # recorded only when given: older runs resume
        settings["header"] = True
    if scalar_mix_parameters is not None:  # recorded only when given: older runs resume
        settings["scalar_mix_parameters"] = [float(v) for v in scalar_mix_parameters]
    # Recorded where not 0, as run.json had none before: such runs resume with 0.
    settings.update({name: value for name, value in options.items() if value})
    check_bilm_directory(model_dir)
    if os.path.isfile(os.path.join(output, "options.json")):  # (--model itself, say)
        raise ValueError(f"--output {output} holds a biLM (options.json): fine-tuning writes its "
                         "task model into its --output; give another directory (the biLM to "
                         "fine-tune is --model).")
    with RunDirectory(output).opened() as run, contextlib.ExitStack() as scratch:
        # Another task's run is named as such first (its metric differs too).
        previous = run.check_settings(settings, run.record(of="finetune"))
        if previous is not None:
            check_record(previous, run.run_file, data["metrics"][0], output)
        keras.utils.set_random_seed(seed)
        with strategy.scope():
            model = _build(cls, model_dir, data["labels"], tokenizer, encoder_units, dropout,
                           fine_tune_bilm, settings.get("scalar_mix_parameters"), options)
            # Compiled with XLA (where `use_xla` says), the model trains on its preprocessor's
            # features, padded to buckets in the input pipeline (`_epochs`).
            model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                          loss=model.task_loss(), xla="on" if compiled else "off")
            model.optimizer.build(model.trainable_variables)
            # A frozen biLM's outputs are computed once per text; the task's layers after it
            # train on them (the same variables and optimizer).
            head = _frozen_bilm_head(model)
            if compiled:
                logger.info("training %s with XLA (its text read in the input pipeline)",
                            type(model).__name__)
        if strategy.num_replicas_in_sync > 1:
            logger.info("training on %d replicas, %d rows each", strategy.num_replicas_in_sync,
                        batch_size // strategy.num_replicas_in_sync)

        given = {}  # the frozen biLM's outputs of each split's texts, once computed
        seconds = {}  # this process's phases (dev_metrics.json's "seconds")

        def score(examples):
            for split, outputs in given.items():
                if examples is data[split]:  # the layers after the biLM, on its outputs
                    return _score(head, examples, batch_size, data["metrics"], compiled,
                                  outputs)
            return _score(model, examples, batch_size, data["metrics"], compiled)
        record = previous or {"settings": settings, "labels": model.labels, "epochs": []}
        run.write_record(record)
        checkpoints = CheckpointFiles(run.checkpoints, prefix="epoch", digits=3)
        done = len(record["epochs"])
        if done:
            problem = damage(checkpoints.path(done))
            if problem is not None:
                raise ValueError(f"{checkpoints.path(done)}, the checkpoint of epoch {done}, is "
                                 f"damaged ({problem}); the run cannot resume without it (only "
                                 f"the last epoch's is kept): move {output} away to fine-tune "
                                 "again (its best.weights.h5 holds the best epoch so far, or "
                                 "its task preset once the run has ended).")
            model.load_weights(checkpoints.path(done))
        metric = data["metrics"][0]
        if done and (done >= epochs or _stopped(record, patience)):
            logger.info("%s has already trained (%d epoch%s%s): scoring it, not training it "
                        "again", output, done, "s" * (done != 1),
                        ", stopped early" * (done < epochs))
        elif done:
            logger.info("resuming %s after epoch %d", output, done)
        if done < epochs and not _stopped(record, patience):
            steps = math.ceil(len(data["train"][1]) / batch_size)
            if head is not None:  # the scored splits' too: scoring runs no biLM either
                began = time.monotonic()
                outputs = _frozen_bilm_outputs(
                    model, {split: data[split][0] for split in ("train", "dev")}, batch_size,
                    verbose, scratch.enter_context(scratch_directory(output, "bilm_outputs")),
                    {split: data[split][0] for split in SCORED_SPLITS if split in data})
                if outputs is not None:
                    given.update(outputs)
                    for split in outputs.values():  # unmapped before their directory goes
                        for feature in split.values():
                            scratch.callback(feature.close)
                    seconds["bilm_outputs"] = round(time.monotonic() - began, 3)
            record["bilm_outputs_once"] = bool(given)  # how its epochs trained (the last ones)
            began = time.monotonic()
            (head if given else model).fit(
                _epochs(model, data["train"], batch_size, seed, done, epochs, compiled,
                        given.get("train")),
                initial_epoch=done, epochs=epochs, steps_per_epoch=steps,
                verbose=progress_verbosity(verbose), shuffle=False,  # each epoch's order: `_epochs`
                callbacks=[_DevScore(model, score, data["dev"], record, run,
                                     checkpoints, patience, metric, seed),
                           keras.callbacks.TensorBoard(run.logs),
                           # run.json's "speed": compilation, steps and scoring apart
                           StepTimes(run, record, tokens_per_step=None)])
            seconds["training"] = round(time.monotonic() - began, 3)
        began = time.monotonic()
        best = max(range(len(record["epochs"])), key=lambda k: record["epochs"][k][metric])
        results = {"dev": record["epochs"][best], "dev_last_epoch": record["epochs"][-1],
                   "best_epoch": best + 1, "epochs": len(record["epochs"]), "xla": compiled,
                   "bilm_outputs_once": record.get("bilm_outputs_once", False), "output": output}
        if "f1" in results["dev"]:  # the F1 of which class (`scores.f1`: label id 1)
            results["f1_label"] = model.labels[1]
        if "test" in data:  # the last epoch's weights are its checkpoint's
            model.load_weights(checkpoints.path(len(record["epochs"])))
            results["test_last_epoch"] = score(data["test"])
        best_file = os.path.join(output, "best.weights.h5")
        if not os.path.exists(best_file) and _ended_model(output) is None:
            raise ValueError(f"{output} has ended, and its task preset (task.json, "
                             "task.weights.h5, model.weights.h5), the one copy of its best "
                             "epoch's weights, is gone (moved?): put it back, or fine-tune "
                             "again into another directory.")
        ended = not os.path.exists(best_file) and _ended_model(output).endswith("task.json")
        with without_optimizer(model):  # the best weights: best.weights.h5, or an ended run's
            if os.path.exists(best_file):
                model.load_weights(best_file)
            else:
                _load_ended_weights(model, output)
        if "test" in data:
            results["test"] = score(data["test"])
        if not ended:  # an ended run's preset stays as it is (a rewrite killed midway would
            model.save_to_preset(output)  # leave none)
        if "dev_mismatched" in data:
            results["dev_mismatched"] = score(data["dev_mismatched"])
        seconds["scoring_and_saving"] = round(time.monotonic() - began, 3)
        results["scored_on_bilm_outputs"] = [split for split in ("dev", *SCORED_SPLITS)
                                             if split in given]
        results["seconds"] = seconds
        write_json_atomically(os.path.join(output, "dev_metrics.json"), results)
        for copy in (best_file, os.path.join(output, "model.keras")):  # an earlier version's
            with contextlib.suppress(FileNotFoundError):  # the preset holds the weights now
                os.remove(copy)
        return results


def predict(model, lines, batch_size=64, scores=False):
    """Predictions of a fine-tuned model for raw input lines: one text per line
    (`text_a<TAB>text_b` for a pair model, tokens separated by spaces for a tagger). Returns
    one string per line: the label name, the score (a regressor), or the tags separated by
    spaces.

    Args:
        model: `finetune`'s output directory, a `.keras` file, or a task model loaded
            (`load_task_model`).
        lines: the input lines (strings).
        batch_size: lines per forward pass.
        scores: with the probabilities: a classifier's label then `<TAB>name=p` for every
            class, a tagger's tags as `tag=p` (`DownstreamTask.decode`).

    Example:
    >>> predict("runs/sst2", ["a charming film .", "dull ."])
    ['1', '0']
    """
    return list(predictions(model, lines, batch_size, scores=scores))


def predictions(model, lines, batch_size=64, source="input", scores=False):
    """`predict`, one prediction at a time as the lines come: `lines` may be any iterator
    (`files.utf8_lines` of a file or stdin). An error the iterator raises (a line that is not
    UTF-8) or a line of the wrong form (fields) is raised after the predictions of every line
    before it; `source` names the lines in errors of their fields."""
    if isinstance(model, (str, os.PathLike)):
        model = load_task_model(model)
    lines, number, warned = iter(lines), 0, False
    while True:
        texts, error = [], None
        try:  # a line the iterator cannot give, or one of the wrong form: the lines before first
            for line in lines:
                number += 1
                if not warned and "\t" in line and model.input_names == ("text",):
                    warned = True  # a labelled file (label<TAB>text) given by mistake?
                    logger.warning("%s, line %d has a tab: this model reads one text a line, "
                                   "the whole line (the label of a label<TAB>text file too)",
                                   source, number)
                texts.extend(model.parse_lines([line], first_line=number))
                if len(texts) == batch_size:
                    break
        except Exception as bad:  # noqa: BLE001: raised below, after the lines before it
            error = ValueError(f"{source}, {bad}") if str(bad).startswith("line ") else bad
        yield from (model.decode(row, text, scores=scores)
                    for text, row in zip(texts, _logits(model, texts, batch_size)))
        if error is not None:
            raise error
        if len(texts) < batch_size:
            return


def load_task_model(path):
    """The task model of a `finetune` output directory (its task preset; `model.keras` in a
    run of an earlier version), a task preset directory, or a `.keras` file; a damaged or
    truncated file is a ValueError that says so, with its name."""
    path = os.fspath(path)
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "task.json")):
        _check_preset_weights(path)
        return DownstreamTask.from_preset(path)
    file = os.path.join(path, "model.keras") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise FileNotFoundError(f"no fine-tuned model at {path} (finetune writes a task preset "
                                "there, task.json and its weights, when it ends).")
    try:
        with zipfile.ZipFile(file) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        damaged = str(error) or type(error).__name__
    if damaged is not None:
        raise ValueError(f"{file} is damaged or truncated: not a whole .keras archive "
                         f"({damaged}); copy it again or run finetune again.")
    return keras.saving.load_model(file)


def is_task_directory(path):
    """Whether `path` is an ended `finetune` run (or a task preset): not a biLM's directory."""
    return _ended_model(path) is not None and not os.path.isfile(
        os.path.join(path, "options.json"))


def _check_preset_weights(path):
    """A clear error for a task preset at `path` whose weights file is missing or is not a
    whole HDF5 file (a truncated copy, a damaged disk), naming it."""
    for name in ("task.weights.h5", "model.weights.h5"):
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            raise FileNotFoundError(f"{path} is an incomplete task preset: it has task.json "
                                    f"and no {name} (moved?); copy it again or run finetune "
                                    "again.")
        try:
            with h5py.File(file, "r"):
                pass
        except OSError as error:  # h5py's, on a truncated file
            problem = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValueError(f"{file} is damaged or truncated: not a whole HDF5 file "
                             f"({problem}); copy it again or run finetune again.") from None


def _ended_model(output):
    """Where an ended run keeps its best model: its task preset's `task.json`, or an earlier
    version's `model.keras`; None while it has not ended."""
    for name in ("task.json", "model.keras"):
        if os.path.isfile(os.path.join(output, name)):
            return os.path.join(output, name)
    return None


def _load_ended_weights(model, output):
    """Loads an ended run's best weights (its preset's, or an earlier version's model.keras)
    into `model`."""
    ended = _ended_model(output)
    if ended.endswith("model.keras"):
        model.load_weights(ended)
        return
    _check_preset_weights(output)
    model.load_task_weights(os.path.join(output, "task.weights.h5"))
    model.backbone.load_weights(os.path.join(output, "model.weights.h5"))


def _model_class(task):
    """The `DownstreamTask` class a task trains: the registered one of its name; GLUE's tasks
    are classifiers (regressors) of one or two sentences."""
    if task.startswith("glue/"):
        return task_class("pair" if GLUE_TASKS[task[len("glue/"):]].is_pair else "classify")
    return task_class(task)


def _read_data(task, cls, data_dir, tfds_data_dir, train, dev, test=None, header=False):
    """{"train": (texts, labels), "dev": ..., "test": ... (if given), "labels": names or
    None, "metrics": [...]}."""
    if task.startswith("glue/"):
        name = task[len("glue/"):]
        if (data_dir is None) == (tfds_data_dir is None) or train or dev or test or header:
            raise ValueError(f"{task} reads GLUE's files from --data-dir, or TFDS's glue/{name} "
                             "from --tfds-data-dir (one of them; not --train/--dev/--test: "
                             "GLUE's test sets have no labels; no --header: GLUE's readers "
                             "know each file's).")
        spec = GLUE_TASKS[name]
        dev_splits = list(spec.dev_files)
        read = (lambda split: read_glue(name, data_dir, split)) if data_dir else \
            (lambda split: read_glue_tfds(name, tfds_data_dir, split))
        data = {"train": read("train"), "dev": read(dev_splits[0]),
                "labels": list(spec.labels) if spec.labels else None,
                "metrics": list(spec.metrics)}
        if len(dev_splits) > 1:
            data["dev_mismatched"] = read(dev_splits[1])
        return data
    if data_dir or tfds_data_dir:
        raise ValueError(f"task {task!r} reads --train and --dev files, not --data-dir or "
                         "--tfds-data-dir (GLUE's, for the glue/ tasks).")
    if train is None or dev is None:
        missing = [f"--{name} ({what})" for name, value, what in (
            ("train", train, "the training file"), ("dev", dev, "the file that picks the best "
                                                               "epoch")) if value is None]
        raise ValueError(f"task {task!r} needs {' and '.join(missing)}.")
    (train_texts, train_labels), (dev_texts, dev_labels) = (cls.read_examples(train, header),
                                                            cls.read_examples(dev, header))
    if task in ("classify", "pair"):  # labelled text (a tagger's: CoNLL)
        _check_columns(train, train_texts, train_labels)
        if not header:
            _check_no_header(train, train_texts, train_labels)
    names, train_ids, dev_ids = cls.prepare_labels(train_labels, dev_labels, train, dev)
    data = {"train": (train_texts, train_ids), "dev": (dev_texts, dev_ids), "labels": names,
            "metrics": cls.metrics_for(names)}
    if test is not None:
        test_texts, test_labels = cls.read_examples(test, header)
        data["test"] = (test_texts, cls.prepare_labels(train_labels, test_labels, train,
                                                       test)[2])
    return data


def _check_columns(path, texts, labels):
    """A ValueError naming `path` when its label column holds more distinct values (over 2)
    than its last text column, whose values are all single words: the layout of swapped
    columns (`text<TAB>label`, or `text_a<TAB>text_b<TAB>label`, as some datasets ship), which
    would train a classifier of sentences on the labels' few words without a word of warning.
    (A pair's first text may repeat with several labels, as an NLI premise does: not checked.)

    Example:
    >>> _check_columns("train.tsv", [("0",), ("1",), ("1",)], ["a film", "dull", "fun"])
    Traceback (most recent call last):
    ValueError: train.tsv: 3 different labels for only 2 different texts ...
    """
    classes = len(set(labels))
    column = [row[-1] for row in texts]
    inputs = len(set(column))
    if classes > max(2, inputs) and all(len(text.split()) <= 1 for text in column):
        shown = ", ".join(repr(label) for label in list(dict.fromkeys(labels))[:2])
        layout = "label<TAB>text" if len(texts[0]) == 1 else "label<TAB>text_a<TAB>text_b"
        raise ValueError(f"{path}: {classes} different labels for only {inputs} different "
                         f"text{'s' * (inputs > 1)} (labels such as {shown}): are its "
                         f"columns swapped? Each line is {layout}, the label first.")


def _check_no_header(path, texts, labels):
    """A ValueError naming `path` when its first line looks like a header read as an example:
    its label on no other line while every other label is on several, and each of its texts
    one word (`label<TAB>sentence`)."""
    counts = collections.Counter(labels)
    first = labels[0]
    others = [n for label, n in counts.items() if label != first]
    if counts[first] == 1 and others and min(others) > 1 and \
            all(len(text.split()) == 1 for text in texts[0]):
        raise ValueError(f"{path}: its first line ({first!r}, {' / '.join(texts[0])!r}) looks "
                         "like a header: its label is on no other line, every other label on "
                         "several. --header skips it (a first example of a class of its own: "
                         "move it down).")


def _pretraining_tokenizer(model_dir):
    """The tokenizer an `elmo-tf train` run read its corpus with (whitespace otherwise)."""
    record = RunDirectory(model_dir).record()
    return (record or {"settings": {}})["settings"].get("tokenizer") or "whitespace"


def check_bilm_directory(model_dir):
    """A clear error where `model_dir` (a `--model`) is not a biLM's directory: no such
    directory, a fine-tuned task model, or one that lacks options.json or weights.hdf5.

    Example:
    >>> check_bilm_directory("runs/sst2")  # a finetune run
    Traceback (most recent call last):
    ValueError: --model runs/sst2 is a fine-tuned task model (task.json), not a biLM: give ...
    """
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"--model {model_dir}: no such directory (a biLM's: an "
                                "`elmo-tf train` or `init` run, or the released files).")
    if is_task_directory(model_dir):
        try:
            source = RunDirectory(model_dir).record()["settings"]["model_dir"]
        except (OSError, ValueError, KeyError, TypeError):  # a preset without a run's record
            source = None
        raise ValueError(f"--model {model_dir} is a fine-tuned task model (task.json), not a "
                         "biLM: give the biLM it was fine-tuned from"
                         + (f" ({source})" if source else "")
                         + "; `predict` and `export` take the task model.")
    for name in ("options.json", "weights.hdf5"):
        if not os.path.isfile(os.path.join(model_dir, name)):
            raise FileNotFoundError(f"--model {model_dir} lacks {name} (an `elmo-tf train` "
                                    "run, or a directory with the released files).")


def _build(cls, model_dir, labels, tokenizer, encoder_units, dropout, fine_tune_bilm,
           scalar_mix_parameters, options):
    embedding = ElmoEmbedding.from_allennlp(os.path.join(model_dir, "options.json"),
                                            os.path.join(model_dir, "weights.hdf5"),
                                            dropout=dropout, fine_tune=fine_tune_bilm,
                                            scalar_mix_parameters=scalar_mix_parameters)
    return cls.create(embedding, labels, tokenizer, encoder_units, dropout, **options)


def _epochs(model, examples, batch_size, seed, first, last, compiled=False, given=None):
    """The batches of epochs `first..last-1`, as the model's features (its preprocessor's):
    each epoch's order depends only on the seed and the epoch, so a resumed run sees what an
    uninterrupted one does. `compiled`: the features padded to buckets (`_bucketed`).
    `given`: the frozen biLM's outputs of the texts (`_frozen_bilm_outputs`), added to each
    batch as `FrozenBiLMHead` reads them."""
    texts, labels = examples
    x, y = model.inputs_for(texts), model.targets(labels)
    n = len(labels)

    def features(i):
        x_i, y_i = model.preprocessor(tf.nest.map_structure(lambda v: tf.gather(v, i), x)), \
            _dense(tf.gather(y, i))
        x_i, y_i = _bucketed((x_i, y_i)) if compiled else (x_i, y_i)
        return (x_i if given is None else _with_given(x_i, given, i)), y_i

    def epoch(e):
        order = tf.argsort(tf.random.stateless_uniform([n], seed=tf.stack([seed, e])))
        batches = tf.data.Dataset.from_tensor_slices(order).batch(batch_size)
        return batches.map(features, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    return tf.data.Dataset.range(first, last).flat_map(epoch).prefetch(tf.data.AUTOTUNE)


# The frozen biLM's outputs of the train and dev texts are kept in a file while a run trains,
# when they take at most this many bytes, and at most half the free disk space there; else
# the biLM runs at every step.
FROZEN_OUTPUTS_BYTES = 64 * 2**30
# The splits only scored whose texts' outputs are computed with them where the budget has room
# (their scoring then runs the layers after the biLM alone: compiled, no program of the whole
# model per bucket); else the whole model scores them.
SCORED_SPLITS = ("test", "dev_mismatched")


def _frozen_bilm_head(model):
    """A `FrozenBiLMHead` of `model`, compiled as it is, when its biLM gives a text the same
    outputs at every epoch (`FrozenBiLMHead.applies_to`); else None."""
    if not FrozenBiLMHead.applies_to(model):
        return None
    head = FrozenBiLMHead(model)
    head.compile(optimizer=model.optimizer, loss=None, xla="on" if model.xla else "off")
    return head


def _frozen_bilm_outputs(model, splits, batch_size, verbose, directory, scored=None):
    """The frozen biLM's outputs of the texts of each split (`{split: texts}`): `{split:
    {feature: FrozenOutputs}}` for each char-ids feature (`FrozenBiLMHead.given_names`), each
    text's at its length, in files in `directory`; None when they would take more than
    `FROZEN_OUTPUTS_BYTES` or half the free space of `directory`, counted before any is
    computed, or where their files' space cannot be taken (a quota; the biLM then runs at
    every step). `scored`: more splits, only scored (`{split:
    texts}`), whose outputs are added while the total stays within that budget (the others
    left to the whole model). The texts are run in batches of similar lengths
    (`Backbone.embed`, on the accelerator if there is one), with a progress bar; where `embed`
    compiles (a GPU), each batch is padded to few shapes (`_padded_to_few_shapes`)."""
    backbone, names = model.backbone, FrozenBiLMHead.given_names(model)
    rows, few_shapes = 4 * batch_size, backbone.embed_compiles()
    lengths = {}  # {split: {feature: each text's tokens}}, a chunk of texts at a time

    def counted(split, texts):  # its texts' tokens counted (`lengths`): their outputs' bytes
        counts = {name: [np.zeros(0, np.int32)] for name in names}
        for start in range(0, len(texts), 4096):
            features = model.preprocessor(model.inputs_for(texts[start:start + 4096]))
            for name in names:
                counts[name].append(sequence_lengths(char_ids_mask(features[name])).numpy())
        lengths[split] = {name: np.concatenate(c) for name, c in counts.items()}
        positions = sum(int(n.sum()) + 2 * len(n) for n in lengths[split].values())
        return positions * backbone.num_layers * backbone.output_dim * 4

    budget = min(FROZEN_OUTPUTS_BYTES, shutil.disk_usage(directory).free // 2)
    needed = sum(counted(split, texts) for split, texts in splits.items())
    if needed > budget:
        logger.info("the frozen biLM's outputs of the %s texts would take %s (more than %s, "
                    "the least of %s and half the free space of %s): the biLM runs at every "
                    "step", ", ".join(splits), readable_size(needed), readable_size(budget),
                    readable_size(FROZEN_OUTPUTS_BYTES), directory)
        return None
    splits = dict(splits)
    for split, texts in (scored or {}).items():
        more = counted(split, texts)
        if needed + more <= budget:
            splits[split], needed = texts, needed + more
    logger.info("computing the frozen biLM's outputs of the %s texts once (%s, in %s)",
                ", ".join(splits), readable_size(needed), directory)
    progress = Progress(sum(len(n) for split in splits for n in lengths[split].values()),
                        unit_name="text", verbose=verbose if verbose in ("auto", 1, 2) else 0)
    given = {split: {} for split in splits}  # every file made (its space taken) first

    def close():
        for outputs in given.values():
            for feature in outputs.values():
                feature.close()

    try:
        for split in splits:
            for name, n in lengths[split].items():
                given[split][name] = FrozenOutputs(directory, n + 2, backbone.num_layers,
                                                   backbone.output_dim)
    except OSError as error:  # a quota, or a disk filled since it was counted
        close()
        logger.warning("%s: the biLM runs at every step", error)
        return None
    try:
        for split, texts in splits.items():
            for name, n in lengths[split].items():
                order = np.argsort(n, kind="stable")  # similar lengths together: less padding
                for start in range(0, len(order), rows):
                    batch = order[start:start + rows]
                    char_ids = model.preprocessor(
                        model.inputs_for([texts[i] for i in batch]))[name]
                    if few_shapes:
                        char_ids = _padded_to_few_shapes(char_ids, rows)
                    layers = np.transpose(backbone.embed(char_ids)["layers_with_boundaries"],
                                          (0, 2, 1, 3))
                    for row, index in enumerate(batch):
                        given[split][name].write(index, layers[row, :n[index] + 2])
                    progress.add(len(batch))
    except BaseException:
        close()
        raise
    return given


def _padded_to_few_shapes(char_ids, rows):
    """`char_ids` `[texts, time, chars]` padded with empty texts to `rows` rows and with
    padding tokens to a power of two of at least 8 tokens: a pass over texts sorted by length
    then takes one shape per doubling of their lengths (4 for texts of up to 64 tokens, where
    `embed`'s own buckets, 25 % apart, take about 14), less than twice the tokens of texts
    longer than 8: where each shape is a compilation of the whole biLM, a one-off pass costs
    more in compilations than in compute."""
    texts, length = char_ids.shape[0], char_ids.shape[1]
    padded = max(8, 1 << max(length - 1, 0).bit_length())
    return tf.pad(char_ids, [[0, rows - texts], [0, padded - length], [0, 0]])


def _with_given(x, given, rows, padded_rows=None):
    """Features `x` of the texts `rows` with their frozen biLM outputs (`given`) added, as
    `FrozenBiLMHead` reads them: each right-padded to its char ids' time + 2 (a bucket's,
    compiled), and with `padded_rows`, to that many rows (empty texts: masked)."""
    x = dict(x)
    for name, outputs in given.items():
        dense, lengths = outputs.rows(rows)
        width = tf.shape(x[name])[1] + 2
        more_rows = 0 if padded_rows is None else padded_rows - tf.shape(lengths)[0]
        dense = tf.pad(dense, [[0, more_rows], [0, width - tf.shape(dense)[1]], [0, 0], [0, 0]])
        x[FrozenBiLMHead.given_key(name, "layers_with_boundaries")] = tf.transpose(
            dense, [0, 2, 1, 3])
        x[FrozenBiLMHead.given_key(name, "mask_with_boundaries")] = tf.pad(
            tf.sequence_mask(lengths, width), [[0, more_rows], [0, 0]])
    return x


def _dense(labels):
    return labels.to_tensor(0) if isinstance(labels, tf.RaggedTensor) else labels


def _bucketed(tensors, rows=None):
    """Every tensor of rank 2 or more right-padded with 0 along its time axis (1) to the
    longest length of the bucket of the longest of them (`bucket_length`, as pre-training's
    batches; a pair's two texts share it), so that XLA compiles a step once per bucket: the
    task models mask what is padding (char ids and word ids 0; a tagger's padded targets are
    masked with it). `rows`: every tensor also padded with rows of 0 (empty texts) to that
    many rows."""
    timed = [t for t in tf.nest.flatten(tensors) if t.shape.rank >= 2]
    length = bucket_length(tf.reduce_max(tf.stack([tf.shape(t)[1] for t in timed])))

    def pad(tensor):
        more_rows = [[0, 0 if rows is None else rows - tf.shape(tensor)[0]]]
        if tensor.shape.rank < 2:
            return tensor if rows is None else tf.pad(tensor, more_rows)
        return tf.pad(tensor, more_rows + [[0, length - tf.shape(tensor)[1]]]
                      + [[0, 0]] * (tensor.shape.rank - 2))

    return tf.nest.map_structure(pad, tensors)


def _logits(model, texts, batch_size, compiled=False, given=None):
    """The model's logits for `texts`, one array per text, batch by batch (a tagger's batches
    have different widths; compiled, a bucket's: rows longer than their text, and a last,
    smaller batch padded with empty rows to `batch_size`, so that scoring compiles once per
    bucket). `model`: a task, or its `FrozenBiLMHead` with `given`, the frozen biLM's outputs
    of `texts` (`_frozen_bilm_outputs`)."""
    run = _scorer(model, compiled)
    task = getattr(model, "task", model)
    rows = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        x = task.preprocessor(task.inputs_for(batch))
        x = _bucketed(x, rows=batch_size) if compiled else x
        if given is not None:
            x = _with_given(x, given, tf.range(start, start + len(batch)),
                            batch_size if compiled else None)
        rows.extend(np.asarray(run(x))[:len(batch)])
    return rows


_SCORERS = weakref.WeakKeyDictionary()


def _scorer(model, compiled):
    """The model's inference on one batch of features, traced once (shapes relaxed; compiled:
    under XLA, once per bucket), run where it is called: under a strategy Keras's
    `predict_on_batch` would give every replica the whole batch."""
    functions = _SCORERS.setdefault(model, {})
    if compiled not in functions:
        functions[compiled] = tf.function(lambda x: model(x, training=False),
                                          jit_compile=compiled, reduce_retracing=not compiled,
                                          autograph=False)
    return functions[compiled]


def _score(model, examples, batch_size, metrics, compiled=False, given=None):
    texts, gold = examples
    return getattr(model, "task", model).scores(
        _logits(model, texts, batch_size, compiled, given), gold, metrics)


def check_record(record, path, metric, output):
    """For a record `RunDirectory.record` read from `path` (a fine-tuning run.json in
    `output`, whose task's main metric is `metric`): raises a ValueError naming the file, the
    field and what `finetune` writes there unless the fields a run resumes from hold what it
    writes (its epochs' dev scores, their main metric, a classifier's word features): a record
    edited by hand, or damaged, is refused here, not deeper with a KeyError or TypeError.

    Example:
    >>> check_record({"settings": settings, "epochs": {"1": 0.5}}, "cls/run.json",
    ...              "accuracy", "cls")
    Traceback (most recent call last):
    ValueError: cls/run.json: "epochs" is {'1': 0.5}, where `elmo-tf finetune` writes a list of
    each finished epoch's dev scores: put back what it wrote, or fine-tune again into another
    --output than cls.
    """
    def refuse(field, value, accepted):
        raise damaged_field(path, field, value, "finetune", accepted,
                            f"fine-tune again into another --output than {output}")

    def score(value):  # (NaN among them: a correlation of constant predictions)
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    dim = record["settings"].get("word_embedding_dim", 0)  # (recorded where not 0)
    if not is_whole(dim, 0):
        refuse('"settings.word_embedding_dim"', dim, "a whole number of 0 or more")
    epochs = record.get("epochs", MISSING)
    if not isinstance(epochs, list):
        refuse('"epochs"', epochs, "a list of each finished epoch's dev scores")
    if record.get("metric", metric) != metric:
        refuse('"metric"', record["metric"], f"{metric!r}, the task's main metric")
    for number, scores in enumerate(epochs, 1):
        if not isinstance(scores, dict) or not all(map(score, scores.values())):
            refuse(f'"epochs" {number}', scores, "an object of the epoch's dev scores")
        if metric not in scores:
            refuse(f'"epochs" {number}\'s {metric!r}', MISSING, f"the epoch's dev {metric}")


def _stopped(record, patience):
    """Whether the last `patience` epochs brought no better dev score than the one before."""
    metric = record.get("metric")
    history = [e[metric] for e in record["epochs"]] if metric else []
    if len(history) <= patience:
        return False
    return max(history[-patience:]) <= max(history[:-patience])


class _DevScore(keras.callbacks.Callback):
    """After every epoch: scores the dev set with the task's metrics (`score`), keeps the best
    weights, checkpoints the task model and optimizer, records the epoch, and stops after
    `patience` epochs without a better main score. `task`: the task model."""

    def __init__(self, task, score, dev, record, run, checkpoints, patience, metric, seed):
        super().__init__()
        self.task, self.score, self.dev, self.seed = task, score, dev, seed
        self.record, self.run, self.checkpoints = record, run, checkpoints
        self.patience, self.metric = patience, metric

    def on_epoch_begin(self, epoch, logs=None):
        # Keras saves no random state with the weights: every epoch's dropout draws start from
        # the seed and the epoch alone, so a resumed run draws what an uninterrupted one does.
        seeds = [v for v in self.task.variables if v.name == "seed_generator_state"]
        for index, state in enumerate(seeds):
            state.assign(np.array([(self.seed * 1_000_003 + epoch * 7919 + index) % 2**31, 0],
                                  dtype=state.dtype))

    def on_epoch_end(self, epoch, logs=None):
        dev = self.score(self.dev)
        if logs is not None:  # for the callbacks after this one (TensorBoard)
            logs.update({f"dev_{k}": float(v) for k, v in dev.items()})
        history = [e[self.metric] for e in self.record["epochs"]]
        if not history or dev[self.metric] > max(history):
            with without_optimizer(self.task):  # a copy of the weights, no Adam slots
                save_weights_atomically(self.task, os.path.join(self.run.path,
                                                                "best.weights.h5"))
        self.checkpoints.save(self.task, epoch + 1, keep=1)
        self.record["epochs"].append({k: float(v) for k, v in dev.items()})
        self.record["metric"] = self.metric
        self.run.write_record(self.record)
        logger.info("epoch %d: dev %s", epoch + 1,
                    ", ".join(f"{k} {v:.4f}" for k, v in dev.items()))
        if _stopped(self.record, self.patience):
            logger.info("no better dev %s in %d epochs: stopping", self.metric, self.patience)
            self.model.stop_training = True
