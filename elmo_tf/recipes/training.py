"""`train` and `evaluate`: pre-training an ELMo biLM with `model.fit`, resumably.

An output directory holds one run:

    options.json                 bilm-tf's options (architecture + training keys)
    weights.hdf5                 the biLM in the released layout (written at the end)
    vocab.txt                    the softmax vocabulary, bilm-tf's format
    language_model.weights.h5    the whole `ElmoLanguageModel` (softmax included; `evaluate`)
    run.json                     the recipe and run settings (a resumed run must match them)
    checkpoints/ckpt-STEP.weights.h5   model + optimizer every checkpoint interval (last 2)
    logs/                        TensorBoard

Keras's "epochs" in `fit` are checkpoint intervals here: a killed run restarted with the same
command loads the newest complete checkpoint, skips the batches it had trained on (the batch
stream is reproducible) and goes on, so it loses at most one interval. The carried LSTM state
of stream batches starts again from zero, as in bilm-tf. Checkpoints are written to a
temporary name and renamed, so none is ever half-written.

Under MultiWorkerMirroredStrategy every worker keeps the whole directory in its own `--output`
(the weights are the same on all of them), so each can resume without a shared file system
(the workers resume from the newest checkpoint they all have); only the chief writes
TensorBoard logs. Give each worker its own `--output`.
"""

import contextlib
import dataclasses
import glob
import json
import logging
import math
import os
import re
import warnings

import keras
import tensorflow as tf

from elmo_tf.data.corpus import CorpusStats, read_corpus
from elmo_tf.data.generated_corpus import GeneratedLanguage, write_generated_corpus
from elmo_tf.data.language_model_dataset import language_model_dataset
from elmo_tf.data.vocabulary import Vocabulary, build_vocabulary
from elmo_tf.files import write_atomically
from elmo_tf.models.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo_language_model import ElmoLanguageModel
from elmo_tf.optimizers import SparseAdagrad
from elmo_tf.recipes.recipe import Recipe

BUILTIN_CORPUS = "builtin"
STRATEGIES = ("default", "mirrored", "multi-worker")
MIXED_PRECISION = {None: None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
MAX_CHECKPOINT_INTERVAL = 1000
_CHECKPOINT = re.compile(r"ckpt-(\d+)\.weights\.h5$")
_STAGED = ".weights.h5"  # the suffix of a checkpoint's staging file (`write_atomically`'s + it)
logger = logging.getLogger("elmo_tf")


def make_strategy(name, cpu_replicas=None):
    """The `tf.distribute` strategy `name`: `default`, `mirrored` or `multi-worker`.

    `mirrored` uses every local GPU, or, without GPUs, `cpu_replicas` logical CPU devices (2 by
    default; set before TensorFlow starts its devices, so call this first). `multi-worker`
    reads the cluster from the `TF_CONFIG` environment variable.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; accepted: {list(STRATEGIES)}.")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "multi-worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy multi-worker reads the cluster from the TF_CONFIG "
                             "environment variable, which is not set.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    cpus = tf.config.list_physical_devices("CPU")
    count = cpu_replicas or 2
    try:  # listing logical devices would start the runtime: configure first
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        if len(tf.config.list_logical_devices("CPU")) != count:
            raise ValueError(f"cannot split the CPU into {count} logical devices: TensorFlow "
                             "has already started; make the strategy first.") from None
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(count)])


def train(recipe, corpus, output, *, vocabulary=None, strategy=None, epochs=None, steps=None,
          seed=0, mixed_precision=None, validation=None, checkpoint_every=None,
          tokenizer="whitespace", tfds_data_dir=None, verbose="auto"):
    """Pre-trains the recipe's biLM on `corpus` into `output`, resuming a killed run there.

    Args:
        recipe: a `Recipe`, a recipe name or a recipe JSON path.
        corpus: file glob(s), `"tfds:NAME"`, or `"builtin"` for the generated corpus of
            `elmo_tf.data.generated_corpus` (written to `output/corpus`; its held-out part is
            the default validation set).
        output: the run's directory (see the module docstring).
        vocabulary: a vocab file; by default built from the corpus with the recipe's
            `min_count` / `max_vocabulary_size`.
        strategy: a `tf.distribute.Strategy` (see `make_strategy`); the default strategy if None.
        epochs: passes over the corpus (default: the recipe's). `steps` instead: optimizer steps.
        seed: seeds the initialisation, dropout, sampling and the batch order.
        mixed_precision: None, `"bfloat16"` or `"float16"` (`mixed_*` Keras policies; the
            softmax and loss stay float32).
        validation: a corpus evaluated (full softmax) at every checkpoint and at the end (not
            under multi-worker training: run `evaluate` afterwards).
        checkpoint_every: steps between checkpoints (default: an epoch, at most 1000 steps).
        tokenizer, tfds_data_dir: how to read the corpus (`elmo_tf.data.read_corpus`).
        verbose: Keras `fit` verbosity.

    Returns:
        A dict: the final training metrics, `"validation"` metrics if any, `"steps"`, and the
        output paths.

    Example:
    >>> results = train("tiny", "builtin", "runs/tiny", epochs=1)
    >>> results["validation"]["perplexity"]
    """
    recipe = recipe if isinstance(recipe, Recipe) else Recipe.resolve(recipe)
    if mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision must be one of {list(MIXED_PRECISION)}; got "
                         f"{mixed_precision!r}.")
    if epochs is not None and steps is not None:
        raise ValueError("give epochs or steps, not both.")
    strategy = strategy or tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    if recipe.batch_size % replicas:
        raise ValueError(f"the recipe's batch_size ({recipe.batch_size}) must be a multiple of "
                         f"the {replicas} replicas.")
    os.makedirs(output, exist_ok=True)
    corpus, validation, best = _resolve_corpus(corpus, validation, output, seed)
    read = {"tokenizer": tokenizer, "tfds_data_dir": tfds_data_dir}
    keras.utils.set_random_seed(seed)

    settings = {"recipe": _recipe_dict(recipe), "corpus": corpus, "seed": seed,
                "tokenizer": tokenizer, "mixed_precision": mixed_precision}
    run_file = os.path.join(output, "run.json")
    previous = _read_json(run_file)
    if previous is not None and previous["settings"] != settings:
        raise ValueError(f"{output} holds another run (run.json differs: "
                         f"{_difference(previous['settings'], settings)}); give another "
                         "--output or delete it.")

    vocab_file = os.path.join(output, "vocab.txt")
    if previous is not None:
        vocab = Vocabulary.load(vocab_file)
        size = previous["corpus_size"]
    else:
        vocab, size = _vocabulary_and_size(vocabulary, corpus, recipe, read)
        vocab.save(vocab_file)

    pairs = size["tokens"] + size["sentences"]  # a sentence gives n + 1 (input, target) pairs
    if recipe.mode == "stream":
        steps_per_epoch = math.ceil(pairs / (recipe.batch_size * recipe.window))
    else:
        steps_per_epoch = math.ceil(size["sentences"] / recipe.batch_size)
    total = steps if steps is not None else (epochs or recipe.epochs) * steps_per_epoch
    # Equal checkpoint intervals of at most the asked length; the total is rounded up to a
    # multiple of them (by fewer steps than there are intervals).
    intervals = math.ceil(total / (checkpoint_every
                                   or min(steps_per_epoch, MAX_CHECKPOINT_INTERVAL)))
    interval = math.ceil(total / intervals)
    _write_json(run_file, {"settings": settings, "corpus_size": size,
                           "steps_per_epoch": steps_per_epoch, "best_perplexity": best})

    policy = MIXED_PRECISION[mixed_precision]
    with strategy.scope():
        lm = build_language_model(recipe, len(vocab), replicas, policy)
        lm.optimizer.build(lm.trainable_variables)
    checkpoints = os.path.join(output, "checkpoints")
    done = _restore(lm, checkpoints, strategy)
    if done >= intervals * interval:
        logger.info("%s has already trained its %d steps; writing its outputs again", output,
                    done)
    elif done:
        logger.info("resuming %s at step %d from %s", output, done, checkpoints)

    stats = CorpusStats()

    def dataset_fn(context):
        sentences = read_corpus(corpus, stats=stats, **read)
        if context.num_input_pipelines > 1:
            sentences = sentences.shard(context.num_input_pipelines, context.input_pipeline_id)
        local = replicas // context.num_input_pipelines  # this worker's replicas
        per_replica = context.get_per_replica_batch_size(recipe.batch_size)
        dataset = language_model_dataset(
            sentences, vocab, mode=recipe.mode, batch_size=per_replica * local,
            window=recipe.window, shuffle_buffer=recipe.shuffle_buffer, seed=seed,
            replicas=local, max_characters_per_token=recipe.model.max_characters_per_token)
        return dataset.skip(done * local)

    if replicas > 1:
        dataset = strategy.distribute_datasets_from_function(dataset_fn)
    else:
        dataset = dataset_fn(tf.distribute.InputContext())
    if validation is not None and _multi_worker(strategy):
        logger.warning("validation is not run under multi-worker training (the workers would "
                       "need equal shares of it); run `elmo-tf evaluate --model %s --corpus %s` "
                       "afterwards", output, validation)
        validation = None
    validation_data = None
    if validation is not None:
        validation_data = evaluation_dataset(validation, vocab, recipe, read)
    callbacks = [keras.callbacks.TerminateOnNaN(), _Checkpoint(checkpoints)]
    if _is_chief(strategy):
        callbacks.append(keras.callbacks.TensorBoard(os.path.join(output, "logs"),
                                                     update_freq=min(50, interval)))
    logger.info("%s: %d steps (%d per pass over the corpus, %d pairs of %d sentences), "
                "checkpoint every %d steps", recipe.name, intervals * interval, steps_per_epoch,
                pairs, size["sentences"], interval)
    with _quiet_end_of_data():
        history = lm.fit(dataset, epochs=intervals, initial_epoch=done // interval,
                         steps_per_epoch=interval, validation_data=validation_data,
                         callbacks=callbacks, verbose=verbose, shuffle=False)
    if stats.as_dict()["lines_read"]:  # not when the run had nothing left to train
        stats.log()
    logs = {k: v[-1] for k, v in history.history.items()} if history.history else {}
    if any(not math.isfinite(v) for v in logs.values()) or lm.stop_training:
        raise FloatingPointError(
            f"training stopped: the loss became NaN or infinite ({logs}); the last good "
            f"checkpoint is in {checkpoints}. Lower the recipe's learning_rate or try without "
            "mixed precision.")
    results = {"steps": int(lm.optimizer.iterations.numpy()), "train": logs}
    if validation is not None:
        results["validation"] = {k[len("val_"):]: v for k, v in logs.items()
                                 if k.startswith("val_")}
        if not results["validation"]:
            results["validation"] = evaluate_language_model(lm, validation, vocab, recipe, read)
    if best is not None:
        results["best_perplexity"] = best
    _write_outputs(lm, output, recipe, len(vocab), pairs)
    results["output"] = output
    return results


def build_language_model(recipe, vocabulary_size, replicas=1, dtype=None):
    """The recipe's `ElmoLanguageModel` (stateful backbone in stream mode), built and compiled
    with the recipe's optimizer (`SparseAdagrad`, bilm-tf's Adagrad; global-norm clip)."""
    config = recipe.model
    backbone = ElmoBackbone(config, stateful=recipe.mode == "stream",
                            max_batch_size=recipe.batch_size // replicas,
                            dropout=recipe.dropout, dtype=dtype)
    lm = ElmoLanguageModel(backbone, vocabulary_size, num_negatives=recipe.num_negatives)
    ids = tf.zeros([1, 1, config.max_characters_per_token], tf.int32)
    lm({"char_ids": ids, "backward_char_ids": ids} if recipe.mode == "stream"
       else {"char_ids": ids})
    lm.reset_states()
    lm.compile(optimizer=SparseAdagrad(
        recipe.learning_rate, initial_accumulator_value=recipe.initial_accumulator_value,
        global_clipnorm=recipe.clip_norm))
    return lm


def evaluation_dataset(corpus, vocabulary, recipe, read):
    """One ordered pass over `corpus` in the recipe's batches."""
    return language_model_dataset(
        read_corpus(corpus, **read), vocabulary, mode=recipe.mode, batch_size=recipe.batch_size,
        window=recipe.window, repeat=False,
        max_characters_per_token=recipe.model.max_characters_per_token)


def evaluate_language_model(lm, corpus, vocabulary, recipe, read):
    """Full-softmax perplexities of `lm` on `corpus`: a dict of metrics."""
    with _quiet_end_of_data():
        results = lm.evaluate(evaluation_dataset(corpus, vocabulary, recipe, read),
                              return_dict=True, verbose=0)
    if "perplexity" not in results:  # not one batch
        batch = (f"{recipe.batch_size} rows of {recipe.window} tokens, each row a stream of "
                 "whole sentences" if recipe.mode == "stream" else "a sentence")
        raise ValueError(f"{corpus} is too small to evaluate: it does not fill one batch of "
                         f"the recipe's {recipe.mode} batches ({batch}).")
    return results


def evaluate(model_dir, corpus, *, tokenizer=None, tfds_data_dir=None):
    """Perplexities (full softmax) of the model trained into `model_dir` on `corpus`.

    Returns a dict: `forward_perplexity`, `backward_perplexity`, `perplexity` (both
    directions' tokens together), `average_perplexity` (the mean of the two, the paper's
    figure), `loss`, and `best_perplexity` when the corpus is the built-in one.
    """
    run = _read_json(os.path.join(model_dir, "run.json"))
    weights = os.path.join(model_dir, "language_model.weights.h5")
    if run is None or not os.path.exists(weights):
        raise ValueError(f"{model_dir} is not a finished training run (it needs run.json and "
                         "language_model.weights.h5, which `elmo-tf train` writes).")
    settings = run["settings"]
    recipe = Recipe.from_dict(settings["recipe"], source=os.path.join(model_dir, "run.json"))
    vocab = Vocabulary.load(os.path.join(model_dir, "vocab.txt"))
    best = None
    if corpus == BUILTIN_CORPUS:
        corpus, best = os.path.join(model_dir, "corpus", "heldout", "*"), run["best_perplexity"]
    lm = build_language_model(recipe, len(vocab))
    with warnings.catch_warnings():  # the file's optimizer state is not needed here
        warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
        lm.load_weights(weights)
    read = {"tokenizer": tokenizer or settings["tokenizer"], "tfds_data_dir": tfds_data_dir}
    results = evaluate_language_model(lm, corpus, vocab, recipe, read)
    results["average_perplexity"] = 0.5 * (results["forward_perplexity"]
                                           + results["backward_perplexity"])
    if best is not None:
        results["best_perplexity"] = best
    return results


# --- helpers -----------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet_end_of_data():
    """Keras warns that "your input ran out of data" at the end of every one-pass evaluation
    dataset (its length is unknown); that end is expected here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        yield


class _Checkpoint(keras.callbacks.Callback):
    """Saves model + optimizer at every Keras epoch end (a checkpoint interval), atomically;
    keeps the last two."""

    def __init__(self, directory, keep=2):
        super().__init__()
        self.directory, self.keep = directory, keep

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training:  # TerminateOnNaN: keep the last good checkpoint
            return
        step = int(self.model.optimizer.iterations.numpy())
        path = os.path.join(self.directory, f"ckpt-{step:09d}.weights.h5")
        _save_weights_atomically(self.model, path)
        for old in _checkpoints(self.directory)[:-self.keep]:
            with contextlib.suppress(FileNotFoundError):  # another worker's, in a shared dir
                os.remove(old[1])


def _save_weights_atomically(model, path):
    def write(tmp):
        staged = tmp + _STAGED  # Keras insists on the suffix
        try:
            model.save_weights(staged)
            os.replace(staged, tmp)
        finally:
            if os.path.exists(staged):
                os.remove(staged)

    write_atomically(path, write)


def _checkpoints(directory):
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.weights.h5")):
        match = _CHECKPOINT.search(path)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _restore(lm, directory, strategy):
    """Loads the newest checkpoint (under multi-worker: the newest every worker has); returns
    its step (0 when there is none). Removes what a killed save left behind."""
    for pattern in ("*.tmp", "*.tmp" + _STAGED):
        for staged in glob.glob(os.path.join(directory, pattern)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(staged)
    found = dict(_checkpoints(directory))
    step = max(found, default=0)
    if _multi_worker(strategy):  # a worker killed while saving may lack the newest one
        newest = strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant([step], tf.int64))
        step = int(tf.reduce_min(strategy.gather(newest, axis=0)))
    if not step:
        return 0
    if step not in found:
        raise ValueError(f"{directory} lacks ckpt-{step:09d}.weights.h5, the newest checkpoint "
                         "the other workers have; restore it from another worker's --output.")
    lm.load_weights(found[step])
    lm.reset_states()
    return step


def _write_outputs(lm, output, recipe, vocabulary_size, pairs):
    config = dataclasses.replace(lm.backbone.config,
                                 training=recipe.training_options(vocabulary_size, pairs))
    lm.backbone.save_allennlp(os.path.join(output, "weights.hdf5"))
    config.to_options_json(os.path.join(output, "options.json"))
    _save_weights_atomically(lm, os.path.join(output, "language_model.weights.h5"))


def _resolve_corpus(corpus, validation, output, seed):
    if corpus != BUILTIN_CORPUS:
        return corpus, validation, None
    directory = os.path.join(output, "corpus")
    if not os.path.exists(os.path.join(directory, "README.txt")):
        write_generated_corpus(directory, seed=seed)
    heldout = os.path.join(directory, "heldout", "*")
    return (os.path.join(directory, "train", "*"), validation or heldout,
            GeneratedLanguage().best_perplexity())


def _vocabulary_and_size(vocabulary, corpus, recipe, read):
    """The vocabulary (the given file, or built from the corpus) and the corpus's size, from one
    counting pass."""
    counted = build_vocabulary(corpus, min_count=recipe.min_count,
                               max_size=recipe.max_vocabulary_size, **read)
    # `<S>`/`</S>` count the sentences (and literal "<S>"/"</S>" tokens, rare enough to ignore).
    counts = counted.counts
    sentences = counts[counted.bos_id]
    size = {"sentences": sentences,
            "tokens": sum(counts) - counts[counted.bos_id] - counts[counted.eos_id]}
    return (counted if vocabulary is None else Vocabulary.load(vocabulary)), size


def _recipe_dict(recipe):
    values = {f: getattr(recipe, f) for f in recipe.__dataclass_fields__}
    values["model"] = recipe.model.to_options()
    return json.loads(json.dumps(values))


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not _multi_worker(strategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)


def _multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def _read_json(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json(path, value):
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)

    write_atomically(path, write)


def _difference(old, new, prefix=""):
    """The differing leaves of two nested dicts, e.g. `recipe.mode: 'stream' then, ...`."""
    parts = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            parts.append(_difference(a, b, f"{prefix}{key}."))
        elif a != b:
            parts.append(f"{prefix}{key}: {a!r} then, {b!r} now")
    return ", ".join(p for p in parts if p)
