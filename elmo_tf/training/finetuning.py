"""`finetune` and `predict`: a downstream task model trained on ELMo (or Masked ELMo)
representations, with early stopping on the dev set's own metric, resumably.

A fine-tuning run lives in its output directory:

* `run.json`: the settings, the label names and one entry per finished epoch (its dev metrics);
* `checkpoints/epoch-NNN.weights.h5`: the model and optimizer after the newest epoch(s);
* `best.weights.h5`: the weights of the epoch with the best dev score so far;
* when the run ends (all epochs, or `patience` epochs without a better dev score): `model.keras`
  (the best epoch's model, which `predict` and `keras.saving.load_model` read) and
  `dev_metrics.json`.

Killed, the same command resumes after the last finished epoch, with the batches and dropout
draws the uninterrupted run would have had (each epoch's depend only on the seed and the
epoch).
"""

import glob
import logging
import math
import os
import re

import keras
import numpy as np
import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.data.conll import read_conll
from elmo_tf.data.glue import GLUE_TASKS, read_glue, read_glue_tfds
from elmo_tf.data.labelled_text import read_labelled_text
from elmo_tf.files import (
    read_json,
    remove_stale_temporaries,
    write_atomically,
    write_json_atomically,
)
from elmo_tf.keras_compat import save_model_to_file
from elmo_tf.metrics import scores
from elmo_tf.models.downstream import SentencePairClassifier, SequenceTagger, TextClassifier
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.training.checkpoints import save_weights_atomically

logger = logging.getLogger("elmo_tf")

PLAIN_TASKS = ("classify", "pair", "tag")
TASKS = PLAIN_TASKS + tuple(f"glue/{name}" for name in GLUE_TASKS)
_EPOCH = re.compile(r"epoch-(\d+)\.weights\.h5$")


def finetune(task, model_dir, output, *, data_dir=None, tfds_data_dir=None, train=None,
             dev=None, tokenizer=None, epochs=10,
             patience=3, batch_size=32, learning_rate=1e-3, encoder_units=512, dropout=0.5,
             fine_tune_bilm=False, scalar_mix_parameters=None, seed=0, verbose="auto"):
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
        seed: initialisation, dropout and batch order.
        verbose: Keras `fit` verbosity.

    Returns:
        `{"dev": {metric: score}, "best_epoch": k, "epochs": n, "output": output}` (plus
        `"dev_mismatched"` for MNLI).

    Example:
    >>> finetune("glue/sst2", "runs/elmo", "runs/sst2", data_dir="glue_data")["dev"]
    {'accuracy': 0.87}
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; accepted: {', '.join(TASKS)}.")
    check_positive_ints(epochs=epochs, patience=patience, batch_size=batch_size,
                        encoder_units=encoder_units)
    # Checked before any model is built.
    data = _read_data(task, data_dir, tfds_data_dir, train, dev)
    if task == "tag":
        tokenizer = "whitespace"  # CoNLL tokens, joined with spaces
    tokenizer = tokenizer or _pretraining_tokenizer(model_dir)
    settings = {"task": task, "model_dir": os.path.abspath(model_dir),
                "data": {k: os.path.abspath(v) for k, v in
                         (("data_dir", data_dir), ("tfds_data_dir", tfds_data_dir),
                          ("train", train), ("dev", dev)) if v},
                "tokenizer": tokenizer, "patience": patience, "batch_size": batch_size,
                "learning_rate": learning_rate, "encoder_units": encoder_units,
                "dropout": dropout, "fine_tune_bilm": bool(fine_tune_bilm), "seed": seed}
    if scalar_mix_parameters is not None:  # recorded only when given: older runs resume
        settings["scalar_mix_parameters"] = [float(v) for v in scalar_mix_parameters]
    record_file = os.path.join(output, "run.json")
    for directory in (output, os.path.join(output, "checkpoints")):
        remove_stale_temporaries(directory)  # what a killed run was writing
    record = read_json(record_file) if os.path.exists(record_file) else None
    if record is not None and record["settings"] != settings:
        differing = sorted(k for k in set(settings) | set(record["settings"])
                           if record["settings"].get(k) != settings.get(k))
        raise ValueError(f"{record_file} holds another fine-tuning run (it differs in "
                         f"{', '.join(differing)}); give another --output.")
    keras.utils.set_random_seed(seed)
    model = _build(task, model_dir, data["labels"], tokenizer, encoder_units, dropout,
                   fine_tune_bilm, settings.get("scalar_mix_parameters"))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=_loss(model))
    model.optimizer.build(model.trainable_variables)
    record = record or {"settings": settings, "labels": model.labels, "epochs": []}
    write_json_atomically(record_file, record)
    checkpoints = os.path.join(output, "checkpoints")
    done = len(record["epochs"])
    if done:
        model.load_weights(os.path.join(checkpoints, f"epoch-{done:03d}.weights.h5"))
        logger.info("resuming %s after epoch %d", output, done)
    metric = data["metrics"][0]
    if done < epochs and not _stopped(record, patience):
        steps = math.ceil(len(data["train"][1]) / batch_size)
        model.fit(_epochs(data["train"], task, batch_size, seed, done, epochs),
                  initial_epoch=done, epochs=epochs, steps_per_epoch=steps, verbose=verbose,
                  callbacks=[_DevScore(data, batch_size, record, record_file,
                                       checkpoints, output, patience, metric, seed)])
    best = max(range(len(record["epochs"])), key=lambda k: record["epochs"][k][metric])
    model.load_weights(os.path.join(output, "best.weights.h5"))

    def write_model(tmp):
        with open(tmp, "wb") as f:
            save_model_to_file(model, f)

    write_atomically(os.path.join(output, "model.keras"), write_model)
    results = {"dev": record["epochs"][best], "best_epoch": best + 1,
               "epochs": len(record["epochs"]), "output": output}
    if "dev_mismatched" in data:
        results["dev_mismatched"] = _score(model, data["dev_mismatched"], batch_size,
                                           data["metrics"])
    write_json_atomically(os.path.join(output, "dev_metrics.json"), results)
    return results


def predict(model_dir, lines, batch_size=64):
    """Predictions of a fine-tuned model (`finetune`'s output directory, or a `.keras` file)
    for raw input lines: one text per line (`text_a<TAB>text_b` for a pair model, tokens
    separated by spaces for a tagger). Returns one string per line: the label name, the score
    (a regressor), or the tags separated by spaces."""
    path = os.path.join(model_dir, "model.keras") if os.path.isdir(model_dir) else model_dir
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no fine-tuned model at {path} (finetune writes "
                                "OUTPUT/model.keras when it ends).")
    model = keras.saving.load_model(path)
    texts = lines
    if isinstance(model, SentencePairClassifier):
        texts = [tuple(line.split("\t")) for line in lines]
        bad = [number for number, fields in enumerate(texts, start=1) if len(fields) != 2]
        if bad:
            raise ValueError(f"line {bad[0]}: a pair model reads text_a<TAB>text_b per line.")
    out = []
    for line, row in zip(lines, _logits(model, texts, batch_size)):
        if isinstance(model, SequenceTagger):
            out.append(" ".join(model.tags[k] for k in row[:len(line.split())].argmax(-1)))
        elif model.labels is None:
            out.append(f"{float(row[0]):.6g}")
        else:
            out.append(model.labels[int(row.argmax())])
    return out


def _read_data(task, data_dir, tfds_data_dir, train, dev):
    """{"train": (texts, labels), "dev": ..., "labels": names or None, "metrics": [...]}."""
    if task.startswith("glue/"):
        name = task[len("glue/"):]
        if (data_dir is None) == (tfds_data_dir is None) or train or dev:
            raise ValueError(f"{task} reads GLUE's files from --data-dir, or TFDS's glue/{name} "
                             "from --tfds-data-dir (one of them; not --train/--dev).")
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
    if train is None or dev is None or data_dir or tfds_data_dir:
        raise ValueError(f"task {task!r} reads --train and --dev files (not --data-dir or "
                         "--tfds-data-dir).")
    if task == "tag":
        (train_tokens, train_tags), (dev_tokens, dev_tags) = read_conll(train), read_conll(dev)
        names = sorted({t for tags in train_tags for t in tags})
        _check_known(dev, {t for tags in dev_tags for t in tags}, names, "tags")
        index = {t: i for i, t in enumerate(names)}
        return {"train": ([" ".join(s) for s in train_tokens],
                          [[index[t] for t in tags] for tags in train_tags]),
                "dev": ([" ".join(s) for s in dev_tokens],
                        [[index[t] for t in tags] for tags in dev_tags]),
                "labels": names, "metrics": _tag_metrics(names)}
    pairs = task == "pair"
    (train_texts, train_labels), (dev_texts, dev_labels) = (
        read_labelled_text(train, pairs=pairs), read_labelled_text(dev, pairs=pairs))
    names = sorted(set(train_labels))
    if len(names) < 2:
        raise ValueError(f"{train} has one label ({names[0]!r}); a classifier needs two or "
                         "more.")
    _check_known(dev, set(dev_labels), names, "labels")
    index = {label: i for i, label in enumerate(names)}
    metrics = ["accuracy", "f1"] if len(names) == 2 else ["accuracy"]
    return {"train": (train_texts, [index[x] for x in train_labels]),
            "dev": (dev_texts, [index[x] for x in dev_labels]), "labels": names,
            "metrics": metrics}


def _tag_metrics(names):
    """Span F1 first for chunk tags (`B-X`, `I-X`, `O`, ...), token accuracy alone otherwise
    (parts of speech)."""
    chunked = all(t == "O" or (t[:2] in ("B-", "I-", "E-", "S-") and len(t) > 2) for t in names)
    return ["span_f1", "token_accuracy"] if chunked else ["token_accuracy"]


def _check_known(path, found, names, what):
    unknown = sorted(found - set(names))
    if unknown:
        raise ValueError(f"{path} has {what} the training file does not have: {unknown[:5]} "
                         f"(training {what}: {names[:20]}).")


def _pretraining_tokenizer(model_dir):
    """The tokenizer an `elmo-tf train` run read its corpus with (whitespace otherwise)."""
    record = os.path.join(model_dir, "run.json")
    if os.path.isfile(record):
        return read_json(record).get("settings", {}).get("tokenizer") or "whitespace"
    return "whitespace"


def _is_pair(task):
    return task == "pair" or (task.startswith("glue/") and GLUE_TASKS[task[5:]].is_pair)


def _build(task, model_dir, labels, tokenizer, encoder_units, dropout, fine_tune_bilm,
           scalar_mix_parameters):
    for name in ("options.json", "weights.hdf5"):
        if not os.path.isfile(os.path.join(model_dir, name)):
            raise FileNotFoundError(f"--model {model_dir} lacks {name} (an `elmo-tf train` "
                                    "run, or a directory with the released files).")
    embedding = ElmoEmbedding.from_allennlp(os.path.join(model_dir, "options.json"),
                                            os.path.join(model_dir, "weights.hdf5"),
                                            dropout=dropout, fine_tune=fine_tune_bilm,
                                            scalar_mix_parameters=scalar_mix_parameters)
    if task == "tag":
        return SequenceTagger(embedding, tags=labels, encoder_units=encoder_units,
                              dropout=dropout)
    if _is_pair(task):
        return SentencePairClassifier(embedding, labels=labels, tokenizer=tokenizer,
                                      encoder_units=encoder_units, dropout=dropout)
    return TextClassifier(embedding, labels=labels, tokenizer=tokenizer,
                          encoder_units=encoder_units, dropout=dropout)


def _loss(model):
    if model.labels is None:
        return keras.losses.MeanSquaredError()
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _inputs(pair, texts):
    """The model's inputs for `texts` (1-tuples, 2-tuples or strings), as string tensors."""
    if pair:
        return {"text_a": tf.constant([t[0] for t in texts], tf.string),
                "text_b": tf.constant([t[1] for t in texts], tf.string)}
    return tf.constant([t if isinstance(t, str) else t[0] for t in texts], tf.string)


def _epochs(examples, task, batch_size, seed, first, last):
    """The batches of epochs `first..last-1`: each epoch's order depends only on the seed and
    the epoch, so a resumed run sees what an uninterrupted one does."""
    texts, labels = examples
    x = _inputs(_is_pair(task), texts)
    y = (tf.ragged.constant(labels, tf.int32) if task == "tag"
         else tf.constant(labels, tf.float32 if isinstance(labels[0], float) else tf.int32))
    n = len(labels)

    def epoch(e):
        order = tf.argsort(tf.random.stateless_uniform([n], seed=tf.stack([seed, e])))
        batches = tf.data.Dataset.from_tensor_slices(order).batch(batch_size)
        return batches.map(lambda i: (tf.nest.map_structure(lambda v: tf.gather(v, i), x),
                                      _dense(tf.gather(y, i))))

    return tf.data.Dataset.range(first, last).flat_map(epoch).prefetch(tf.data.AUTOTUNE)


def _dense(labels):
    return labels.to_tensor(0) if isinstance(labels, tf.RaggedTensor) else labels


def _logits(model, texts, batch_size):
    """The model's logits for `texts`, one array per text, batch by batch (a tagger's batches
    have different widths)."""
    pair = isinstance(model, SentencePairClassifier)
    return [row for start in range(0, len(texts), batch_size)
            for row in np.asarray(model.predict_on_batch(
                _inputs(pair, texts[start:start + batch_size])))]


def _score(model, examples, batch_size, metrics):
    texts, gold = examples
    logits = _logits(model, texts, batch_size)
    if isinstance(model, SequenceTagger):
        predicted = [list(row[:len(g)].argmax(-1)) for row, g in zip(logits, gold)]
        names = model.tags
        gold_tags = [[names[k] for k in g] for g in gold]
        predicted_tags = [[names[k] for k in p] for p in predicted]
        return {m: getattr(scores, m)(gold_tags, predicted_tags) for m in metrics}
    logits = np.stack(logits)
    predicted = logits[:, 0] if model.labels is None else logits.argmax(-1)
    return {m: getattr(scores, m)(np.asarray(gold), predicted) for m in metrics}


def _stopped(record, patience):
    """Whether the last `patience` epochs brought no better dev score than the one before."""
    metric = record.get("metric")
    history = [e[metric] for e in record["epochs"]] if metric else []
    if len(history) <= patience:
        return False
    return max(history[-patience:]) <= max(history[:-patience])


class _DevScore(keras.callbacks.Callback):
    """After every epoch: scores the dev set with the task's metrics, keeps the best weights,
    checkpoints the model and optimizer, records the epoch, and stops after `patience` epochs
    without a better main score."""

    def __init__(self, data, batch_size, record, record_file, checkpoints, output, patience,
                 metric, seed):
        super().__init__()
        self.seed = seed
        self.data, self.batch_size = data, batch_size
        self.record, self.record_file = record, record_file
        self.checkpoints, self.output = checkpoints, output
        self.patience, self.metric = patience, metric

    def on_epoch_begin(self, epoch, logs=None):
        # Keras saves no random state with the weights: every epoch's dropout draws start from
        # the seed and the epoch alone, so a resumed run draws what an uninterrupted one does.
        seeds = [v for v in self.model.variables if v.name == "seed_generator_state"]
        for index, state in enumerate(seeds):
            state.assign(np.array([(self.seed * 1_000_003 + epoch * 7919 + index) % 2**31, 0],
                                  dtype=state.dtype))

    def on_epoch_end(self, epoch, logs=None):
        dev = _score(self.model, self.data["dev"], self.batch_size,
                     self.data["metrics"])
        history = [e[self.metric] for e in self.record["epochs"]]
        if not history or dev[self.metric] > max(history):
            save_weights_atomically(self.model, os.path.join(self.output, "best.weights.h5"))
        os.makedirs(self.checkpoints, exist_ok=True)
        save_weights_atomically(self.model,
                                os.path.join(self.checkpoints, f"epoch-{epoch + 1:03d}.weights.h5"))
        self.record["epochs"].append({k: float(v) for k, v in dev.items()})
        self.record["metric"] = self.metric
        write_json_atomically(self.record_file, self.record)
        for old in glob.glob(os.path.join(self.checkpoints, "epoch-*.weights.h5")):
            match = _EPOCH.search(old)
            if match and int(match.group(1)) < epoch + 1:
                os.remove(old)
        logger.info("epoch %d: dev %s", epoch + 1,
                    ", ".join(f"{k} {v:.4f}" for k, v in dev.items()))
        if _stopped(self.record, self.patience):
            logger.info("no better dev %s in %d epochs: stopping", self.metric, self.patience)
            self.model.stop_training = True
