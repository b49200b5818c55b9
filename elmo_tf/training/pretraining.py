"""`train` and `evaluate`: pre-training any registered model family (ELMo's biLM, Masked ELMo,
...) with `model.fit`, resumably.

The recipe's objective picks the family (`elmo_tf.models.family`), which gives the model and its
batches: ELMo an `ElmoLanguageModel` on `language_model_dataset`, Masked ELMo a
`MaskedElmoLanguageModel` on `masked_language_model_dataset`. Nothing here depends on which.

A run lives in its directory (`RunDirectory`). Keras's "epochs" in `fit` are checkpoint
intervals here: a killed run restarted with the same command loads the newest complete
checkpoint, skips the batches it had trained on (the batch stream is reproducible) and goes
on, so it loses at most one interval. The carried LSTM state of stream batches starts again
from zero, as in bilm-tf. Checkpoints are written to a temporary name and renamed, so none is
ever half-written.

Under MultiWorkerMirroredStrategy every worker keeps the whole directory in its own `--output`
(the weights are the same on all of them), so each can resume without a shared file system
(the workers resume from the newest checkpoint they all have); only the chief writes
TensorBoard logs. Give each worker its own `--output`.
"""

import contextlib
import logging
import math
import os
import time
import warnings

import keras
import tensorflow as tf

from elmo_tf.checks import MISSING, check_positive_ints, damaged_field, is_number, is_whole
from elmo_tf.data.corpus import BUILTIN_CORPUS, corpus_identity, read_corpus
from elmo_tf.keras_compat import progress_verbosity
from elmo_tf.optimizers import Adam, SparseAdagrad, WarmupLinearDecay
from elmo_tf.recipes.recipe import Recipe
from elmo_tf.training.checkpoints import Checkpoint, restore, trained_past
from elmo_tf.models.compiled_step import XLA_MODES, check_xla_mode, use_xla
from elmo_tf.training.distribution import is_chief, is_multi_worker
from elmo_tf.text.vocabulary import Vocabulary
from elmo_tf.training.run_directory import RunDirectory, recipe_settings
from elmo_tf.training.step_times import StepTimes

MIXED_PRECISION = {None: None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
MAX_CHECKPOINT_INTERVAL = 1000
# `xla="auto"` compiles on CPUs a run of at least this many steps, or of a wall-clock budget
# of at least this many minutes (`xla_pays_off_on_cpus`).
XLA_CPU_MIN_STEPS = 1000
XLA_CPU_MIN_MINUTES = 5
logger = logging.getLogger("elmo_tf")


def train(recipe, corpus, output, *, vocabulary=None, strategy=None, epochs=None, steps=None,
          minutes=None, seed=0, mixed_precision=None, validation=None, checkpoint_every=None,
          tokenizer="whitespace", tfds_data_dir=None, xla=None, verbose="auto"):
    """Pre-trains the recipe's model on `corpus` into `output`, resuming a killed run there.

    `seed` seeds the process (`keras.utils.set_random_seed`: the initialisation, dropout,
    sampling) and the batch order.

    Args:
        recipe: a `Recipe`, a recipe name or a recipe JSON path.
        corpus: file glob(s), `"tfds:NAME"`, or `"builtin"` for the generated corpus of
            `elmo_tf.data.generated_corpus` (written to `output/corpus`; its held-out part is
            the default validation set).
        output: the run's directory (see `RunDirectory`).
        vocabulary: a vocab file; by default built from the corpus with the recipe's
            `min_count` / `max_vocabulary_size`.
        strategy: a `tf.distribute.Strategy` (see `make_strategy`); the default strategy if None.
        epochs: passes over the corpus (default: the recipe's `steps` where it has them, else
            its `epochs`; a resumed run: its own total). `steps` instead: optimizer steps.
            Either is the run's total: a resumed run trains what is left (`checkpoint_plan`);
            a total below the one the run was last given, where it has trained past it, is
            refused (`relabelled_steps`; not under multi-worker training).
        minutes: instead of `epochs` or `steps`, a wall-clock budget: the run trains (the
            corpus read again as often as it takes) until this many minutes of `fit` have
            passed in all, then checkpoints and writes its outputs. run.json records the budget
            and the seconds trained up to each checkpoint, so a killed run resumes with what
            is left of it, and a run given a larger budget goes on; resumed with none of
            `epochs`, `steps` and `minutes`, it keeps its budget. One worker only (with or
            without a `MirroredStrategy`): a multi-worker run takes `steps`.
        seed: seeds the initialisation, dropout, sampling and the batch order.
        mixed_precision: None, `"bfloat16"` or `"float16"` (`mixed_*` Keras policies; the
            softmax and loss stay float32).
        validation: a corpus evaluated (full softmax) at every checkpoint and at the end (not
            under multi-worker training: run `evaluate` afterwards).
        checkpoint_every: steps between checkpoints (default: an epoch, at most 1000 steps).
        tokenizer, tfds_data_dir: how to read the corpus (`elmo_tf.data.read_corpus`).
        xla: `"auto"` (XLA per replica on GPUs, and on CPUs for a run whose total is long
            enough to win back the compilation: `xla_pays_off_on_cpus`), `"on"` or `"off"`
            (`elmo_tf.training.use_xla`, `CompiledStep`); recorded in run.json (with the
            decision, `xla_compiled`), and a resumed run keeps the setting unless `xla` is
            given. Compiled programs are kept in the persistent XLA cache
            (`elmo_tf.xla_cache`). Under XLA, dropout and the sampled negatives come from
            XLA's own random generator, which ignores `seed`.
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
    if xla is not None:
        check_xla_mode(xla)
    if sum(v is not None for v in (epochs, steps, minutes)) > 1:
        raise ValueError("give one of epochs, steps and minutes.")
    check_positive_ints(**{name: value for name, value in (("epochs", epochs), ("steps", steps))
                           if value is not None})
    if minutes is not None and not (is_number(minutes) and minutes > 0):
        raise ValueError(f"minutes must be a positive number; got {minutes!r}.")
    strategy = strategy or tf.distribute.get_strategy()
    if minutes is not None and is_multi_worker(strategy):
        raise ValueError("minutes (a wall-clock budget) is for one worker: each worker's clock "
                         "would stop it at another step, and the others would wait for it "
                         "forever; give steps (--steps) to a multi-worker run.")
    replicas = strategy.num_replicas_in_sync
    copies = recipe.family.copies_per_sentence(recipe)
    if recipe.batch_size % (replicas * copies):
        raise ValueError(f"the recipe's batch_size ({recipe.batch_size}) must be a multiple of "
                         f"the {replicas} replicas" + (
                             f" times the {copies} copies of each sentence its batches "
                             "read" if copies > 1 else "") + ".")
    run = RunDirectory(output)
    # Checked before any work, and before anything is written; a resumed run keeps its own
    # vocab.txt and ignores the file.
    given_vocabulary = (Vocabulary.load(vocabulary)
                        if vocabulary is not None and run.record() is None else None)
    read = {"tokenizer": tokenizer, "tfds_data_dir": tfds_data_dir}
    identity = corpus_identity(corpus, tfds_data_dir, log=True)
    if validation is not None:
        corpus_identity(validation, tfds_data_dir, log=True)
    with run.opened():
        return _train(run, recipe, corpus, identity, given_vocabulary, strategy, epochs, steps,
                      minutes, seed, mixed_precision, validation, checkpoint_every, read, xla,
                      verbose)


def _train(run, recipe, corpus, identity, given_vocabulary, strategy, epochs, steps, minutes,
           seed, mixed_precision, validation, checkpoint_every, read, xla, verbose):
    """`train`'s run, in its opened (locked) directory."""
    output = run.path
    replicas = strategy.num_replicas_in_sync
    settings = {"recipe": recipe_settings(recipe), "corpus": identity, "seed": seed,
                "tokenizer": read["tokenizer"], "mixed_precision": mixed_precision}
    recorded = run.record(of="train")
    if recorded is not None:  # a damaged record named as such, before it is compared
        check_record(recorded, run.run_file)
    # Before the built-in corpus is written there.
    previous = run.check_settings(settings, recorded)
    if steps is None and not epochs and minutes is None and "minutes" in (previous or {}):
        if is_multi_worker(strategy):  # (`train` refuses minutes under it; run.json may not)
            raise ValueError(f"{output} trained for --minutes {previous['minutes']:g}, a "
                             "wall-clock budget, which is for one worker; give a multi-worker "
                             "run its total in steps (--steps).")
        minutes = previous["minutes"]  # resumed as it started: its wall-clock budget
    corpus, validation, best = run.resolve_corpus(corpus, validation, seed)
    keras.utils.set_random_seed(seed)
    xla = xla or (previous or {}).get("xla", "auto")
    vocab, size = run.vocabulary_and_size(previous, given_vocabulary, corpus, recipe, read)
    pairs = size["tokens"] + size["sentences"]  # a sentence gives n + 1 (input, target) pairs
    steps_per_epoch = _steps_per_epoch(recipe, size, pairs)
    if steps is not None or epochs:
        total = steps if steps is not None else epochs * steps_per_epoch
    elif previous is not None and minutes is None:
        # as it started (a run from before recipes had steps: its epochs)
        total = previous.get("steps") or recipe.epochs * steps_per_epoch
    else:  # a new run's; a time budget's (it sets only the checkpoint interval) the same
        total = recipe.steps or recipe.epochs * steps_per_epoch
    if recipe.decay_steps is not None and (minutes is not None or total > recipe.decay_steps):
        length = f"{minutes:g} minutes" if minutes is not None else f"{total} steps"
        raise ValueError(f"recipe {recipe.name!r} decays its learning rate to zero at step "
                         f"{recipe.decay_steps} (decay_steps): a run of {length} could train "
                         f"past it at zero; give at most {recipe.decay_steps} steps (--steps), "
                         "or a recipe whose decay_steps is the run's length.")
    # (Not a multi-worker run's: each worker would decide alone, before `restore` agrees on a
    # step.)
    if minutes is None and not is_multi_worker(strategy):
        trained = relabelled_steps(run.checkpoints, previous, total)
        if trained:
            minutes_hint = (f" (it trained for --minutes {previous['minutes']:g}: give "
                            "no length, or --minutes, to go on with it)"
                            if "minutes" in (previous or {}) else "")
            raise ValueError(f"{output} has trained {trained} steps, more than the {total} "
                             f"asked{minutes_hint}: its weights are step {trained}'s, and would be "
                             f"written out as a run of {total} steps; ask for {trained} steps "
                             "or more, or train into another output directory.")
    compiled = use_xla(xla, strategy, cpus=xla_pays_off_on_cpus(total, minutes))
    # An epoch between checkpoints (at most 1000 steps), or a tenth of a run of many epochs.
    every = checkpoint_every or min(max(steps_per_epoch, math.ceil(total / 10)),
                                    MAX_CHECKPOINT_INTERVAL)
    # Corpus tokens read per step (each copy of a sentence, the masked LM's K, reads it again)
    # and the predictions the objective is trained on per step.
    tokens_per_step = size["tokens"] * recipe.family.copies_per_sentence(recipe) / steps_per_epoch
    supervised = recipe.family.supervised_predictions(recipe, size)
    record = {"settings": settings, "corpus_size": size, "steps_per_epoch": steps_per_epoch,
              "tokens_per_step": round(tokens_per_step, 6),
              "supervised_predictions_per_step": None if supervised is None else round(
                  supervised / steps_per_epoch, 6),
              "best_perplexity": best, "xla": xla, "xla_compiled": compiled}
    if minutes is not None:
        record.update(minutes=minutes,
                      trained_seconds=(previous or {}).get("trained_seconds", 0.0))
    else:  # the total asked: --steps, --epochs in steps, else the recipe's steps or epochs
        record["steps"] = total
    run.write_record(record)

    with strategy.scope():
        lm = build_language_model(recipe, len(vocab), replicas, MIXED_PRECISION[mixed_precision],
                                  xla=compiled)
        lm.set_vocabulary(vocab.tokens)
        lm.optimizer.build(lm.trainable_variables)
    done = restore(lm, run.checkpoints, strategy)
    budget = None
    if minutes is None:
        first, intervals, interval = checkpoint_plan(total, every, done)
        finished = done >= total
        if finished:
            logger.info("%s has already trained its %d steps (%d asked); writing its outputs "
                        "again", output, done, total)
    else:
        if not done:
            record["trained_seconds"] = 0.0  # seconds of checkpoints that are gone
        budget = TimeBudget(minutes * 60, record["trained_seconds"], run, record)
        first, interval = done // every, every
        finished = budget.spent()
        intervals = first if finished else first + UNBOUNDED_INTERVALS
        if finished:
            logger.info("%s has already trained its %g minutes (%.1f trained); writing its "
                        "outputs again", output, minutes, record["trained_seconds"] / 60)
    if done and not finished:
        logger.info("resuming %s at step %d from %s", output, done, run.checkpoints)

    dataset = _training_dataset(corpus, vocab, recipe, read, strategy, seed, done,
                                pad_to_buckets=lm.xla)
    if validation is not None and is_multi_worker(strategy):
        logger.warning("validation is not run under multi-worker training (the workers would "
                       "need equal shares of it); run `elmo-tf evaluate --model %s --corpus %s` "
                       "afterwards", output, validation)
        validation = None
    validation_data = None
    if validation is not None:
        validation_data = evaluation_dataset(validation, vocab, recipe, read,
                                             pad_to_buckets=lm.xla)
    callbacks = [keras.callbacks.TerminateOnNaN(), Checkpoint(run.checkpoints)]
    if budget is not None:
        callbacks.append(budget)  # after Checkpoint: it records the seconds of the one saved
    callbacks.append(StepTimes(run if is_chief(strategy) else None, record, tokens_per_step))
    if is_chief(strategy):
        # Keras writes an interval's `epoch_*` metrics (validation included) under the last
        # batch's record_if (step % update_freq == 0): a batch frequency that does not divide
        # the interval drops them. The largest divisor of the interval up to 50 keeps them.
        log_every = max(d for d in range(1, min(50, interval) + 1) if interval % d == 0)
        callbacks.append(keras.callbacks.TensorBoard(run.logs, update_freq=log_every))
    if budget is not None:  # Keras's bar (last, as Keras places its own), without "Epoch 3/1000000"
        callbacks.append(BudgetProgress(minutes))
    if budget is not None:
        length = f"{minutes:g} minutes ({round(budget.left() / 60, 2):g} left)"
    else:
        planned = done + (intervals - first) * interval
        length = (f"{planned:,} steps" if planned == total else
                  f"{planned:,} steps, the run's {total:,} rounded up to whole checkpoint "
                  "intervals")
    logger.info("%s: %s (%s steps per pass over the corpus of %s sentences, %s tokens), "
                "checkpoint every %s steps", recipe.name, length, f"{steps_per_epoch:,}",
                f"{size['sentences']:,}", f"{size['tokens']:,}", f"{interval:,}")
    with quiet_end_of_data():
        history = lm.fit(dataset, epochs=intervals, initial_epoch=first,
                         steps_per_epoch=interval, validation_data=validation_data,
                         callbacks=callbacks, verbose=progress_verbosity(verbose),
                         shuffle=False)
    logs = {k: v[-1] for k, v in history.history.items()} if history.history else {}
    # The losses only: a metric of nothing counted (a held-out masking that selected no token)
    # is NaN without anything having gone wrong.
    if any(not math.isfinite(logs[k]) for k in ("loss", "val_loss") if k in logs) \
            or (lm.stop_training and not (budget and budget.spent())):
        raise FloatingPointError(
            f"training stopped: the loss became NaN or infinite ({logs}); the last good "
            f"checkpoint is in {run.checkpoints}. Lower the recipe's learning_rate or try "
            "without mixed precision.")
    results = {"steps": int(lm.optimizer.iterations.numpy()), "train": logs}
    if budget is not None:
        results["trained_minutes"] = round(record["trained_seconds"] / 60, 2)
    if validation is not None:
        results["validation"] = {k[len("val_"):]: v for k, v in logs.items()
                                 if k.startswith("val_")}
        if not results["validation"]:
            results["validation"] = evaluate_language_model(lm, validation, vocab, recipe, read)
    if best is not None and recipe.family.next_token_bound:
        results["best_perplexity"] = best
    run.write_outputs(lm, recipe, len(vocab), pairs, read["tokenizer"])
    results["output"] = output
    return results




# A run with a time budget plans this many checkpoint intervals: more than it can train.
UNBOUNDED_INTERVALS = 10**6


class BudgetProgress(keras.callbacks.ProgbarLogger):
    """Keras's progress bar for a run with a time budget: each checkpoint interval headed
    `Epoch 3 (a 30-minute budget)`, not `Epoch 3/1000000` (the intervals `fit` is given are
    only a bound, `UNBOUNDED_INTERVALS`). Given in `fit`'s callbacks, it replaces Keras's own.

    Example:
    >>> model.fit(dataset, epochs=UNBOUNDED_INTERVALS, callbacks=[TimeBudget(...),
    ...                                                          BudgetProgress(30)])
    """

    def __init__(self, minutes):
        super().__init__()
        self.minutes = minutes

    def set_params(self, params):
        super().set_params(params)
        self.epochs = 1  # Keras's "Epoch k/N" line: printed only for more than one epoch

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        if self.verbose:
            print(f"Epoch {epoch + 1} (a {self.minutes:g}-minute budget)", flush=True)


class TimeBudget(keras.callbacks.Callback):
    """Stops `fit` once `seconds` of training have passed in all, `already` of them in earlier
    processes (the first batch's tracing and compilation included), and records in the run's
    record (`run.json`) the seconds trained up to each checkpoint saved (`Checkpoint` saves
    the interval it stops)."""

    def __init__(self, seconds, already, run, record):
        super().__init__()
        self.seconds, self.already, self.run, self.record = seconds, already, run, record
        self.began = None

    def elapsed(self):
        return self.already + (0.0 if self.began is None else time.monotonic() - self.began)

    def spent(self):
        return self.elapsed() >= self.seconds

    def left(self):
        return max(0.0, self.seconds - self.elapsed())

    def on_train_begin(self, logs=None):
        self.began = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if self.spent():
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if math.isfinite((logs or {}).get("loss", 0.0)):  # Checkpoint saved it
            self.record["trained_seconds"] = round(self.elapsed(), 1)
            self.run.write_record(self.record)


def xla_pays_off_on_cpus(steps, minutes=None):
    """Whether `xla="auto"` compiles a pre-training run of `steps` steps (or of a wall-clock
    budget of `minutes`) on CPUs: when it is long enough to win back, several times over, the
    seconds XLA spends compiling each batch shape (at least `XLA_CPU_MIN_STEPS` steps or
    `XLA_CPU_MIN_MINUTES` minutes). On a 2-core AMD EPYC XLA made `elmo_cpu`'s steady step
    1.35x faster and `tiny`'s 1.73x, and `tiny`'s whole run of 1,551 steps 1.41x, compilation
    included, against about 20 s of compilation for a 20-step `elmo_cpu` run on a Xeon
    (`docs/benchmarks.md`); a short run (a smoke test, the suite's) would only wait for it.

    Example:
    >>> xla_pays_off_on_cpus(1551), xla_pays_off_on_cpus(20), xla_pays_off_on_cpus(None, 30)
    (True, False, True)
    """
    if minutes is not None:
        return minutes >= XLA_CPU_MIN_MINUTES
    return steps >= XLA_CPU_MIN_STEPS


def check_record(record, path):
    """For a record `RunDirectory.record` read (an object with "settings"), from `path` (a
    pre-training run.json): raises a ValueError naming the file, the field and what `train`
    writes there unless every field a run is resumed or evaluated from holds what `train`
    writes: a record edited by hand, or damaged, is refused here, not deeper with a TypeError.

    Example:
    >>> check_record({"settings": settings, "corpus_size": size, "minutes": "30"},
    ...              "runs/tiny/run.json")
    Traceback (most recent call last):
    ValueError: runs/tiny/run.json: "minutes" is '30', where `elmo-tf train` writes a number
    above 0: put back what it wrote, or train the run again.
    """
    def refuse(field, value, accepted):
        raise damaged_field(path, field, value, "train", accepted, "train the run again")

    settings = record["settings"]  # (an object: `RunDirectory.record`'s check)
    if not isinstance(settings.get("recipe", MISSING), dict):
        refuse('"settings.recipe"', settings.get("recipe", MISSING), "the recipe, an object")
    if not isinstance(settings.get("tokenizer", MISSING), str):
        refuse('"settings.tokenizer"', settings.get("tokenizer", MISSING), "the tokenizer's name")
    size = record.get("corpus_size", MISSING)
    if not isinstance(size, dict):
        refuse('"corpus_size"', size, 'an object of "sentences" and "tokens"')
    for key in ("sentences", "tokens"):
        if not is_whole(size.get(key, MISSING), 0):
            refuse(f'"corpus_size.{key}"', size.get(key, MISSING), "a whole number of 0 or more")
    checks = {"steps": (lambda v: is_whole(v, 1), "a whole number of steps above 0"),
              "minutes": (lambda v: is_number(v) and v > 0, "a number above 0"),
              "trained_seconds": (lambda v: is_number(v) and v >= 0, "a number of 0 or more"),
              "xla": (lambda v: v in XLA_MODES, f"one of {list(XLA_MODES)}"),
              "best_perplexity": (lambda v: v is None or (is_number(v) and v > 0),
                                  "null or a number above 0")}
    for key, (valid, accepted) in checks.items():
        if key in record and not valid(record[key]):
            refuse(f'"{key}"', record[key], accepted)


def relabelled_steps(checkpoints, previous, total):
    """The steps a run (its `checkpoints` directory, its run.json record `previous`) has
    trained when a command of `total` steps would write that later step's weights out as a run
    of `total` steps, else 0: a total below the one the run was last given (or any total, for
    a run given `--minutes`) where the run has trained past it. A total the run was given is
    never refused: its plan rounds it up (`checkpoint_plan`), and the same command finishes it.

    Example:
    >>> relabelled_steps("runs/tiny/checkpoints", {"steps": 40}, 30)  # trained to step 40
    40
    """
    previous = previous or {}
    # (a record without either, an elmo-tf 0.2 run's, was given the total it resumes with)
    asked = previous.get("steps", None if "minutes" in previous else total)
    return trained_past(checkpoints, total) if asked is None or total < asked else 0


def checkpoint_plan(total, every, done=0):
    """How `fit` runs a run of `total` steps (a total: `done` of them are already trained) with
    a checkpoint at most every `every` steps: `(initial_epoch, epochs, steps_per_epoch)`, a Keras
    epoch being one checkpoint interval.

    The intervals are equal, the total is rounded up to a multiple of them (by fewer steps than
    there are intervals), and a resumed run keeps the plan it was killed in, so that it takes
    the same steps as an uninterrupted one. Resumed with another `total` or `every` (a checkpoint
    off the new plan's grid), the steps left are planned anew: `--steps 30`, then `--steps 40`
    in the same directory, trains 40 steps in all.

    Example:
    >>> checkpoint_plan(total=10, every=4)
    (0, 3, 4)
    >>> checkpoint_plan(total=40, every=40, done=30)
    (3, 4, 10)
    """
    intervals = math.ceil(total / every)
    interval = math.ceil(total / intervals)
    if done >= total:
        return intervals, intervals, interval  # nothing left
    if done % interval == 0:
        return done // interval, intervals, interval
    left = math.ceil((total - done) / every)
    interval = math.ceil((total - done) / left)
    first = done // interval
    return first, first + left, interval


def build_language_model(recipe, vocabulary_size, replicas=1, dtype=None, xla="auto"):
    """The recipe's pre-training task (`Family.build_language_model`: an `ElmoLanguageModel`,
    a `MaskedElmoLanguageModel`, ...), built and compiled with the recipe's optimizer
    (`SparseAdagrad`, bilm-tf's Adagrad, or `Adam`; global-norm clip), with XLA per replica
    as `xla` says (`CompiledStep.compile`)."""
    lm = recipe.family.build_language_model(recipe, vocabulary_size, replicas, dtype)
    lm.reset_states()
    learning_rate = recipe.learning_rate
    if recipe.warmup_steps or recipe.decay_steps is not None:
        learning_rate = WarmupLinearDecay(learning_rate, recipe.warmup_steps, recipe.decay_steps)
    if recipe.optimizer == "adam":
        optimizer = Adam(learning_rate, global_clipnorm=recipe.clip_norm)
    else:
        optimizer = SparseAdagrad(learning_rate,
                                  initial_accumulator_value=recipe.initial_accumulator_value,
                                  global_clipnorm=recipe.clip_norm)
    lm.compile(optimizer=optimizer, xla=xla)
    return lm


def evaluation_dataset(corpus, vocabulary, recipe, read, pad_to_buckets=False):
    """One ordered pass over `corpus` in the family's held-out batches
    (`Family.evaluation_batches`; `pad_to_buckets`: for XLA)."""
    return recipe.family.evaluation_batches(read_corpus(corpus, **read), vocabulary, recipe,
                                            pad_to_buckets=pad_to_buckets)


def evaluate_language_model(lm, corpus, vocabulary, recipe, read):
    """Full-softmax perplexities of `lm` on `corpus`: a dict of metrics."""
    with quiet_end_of_data():
        results = lm.evaluate(evaluation_dataset(corpus, vocabulary, recipe, read,
                                                 pad_to_buckets=lm.xla),
                              return_dict=True, verbose=0)
    if "perplexity" not in results:  # not one batch
        batch = (f"{recipe.batch_size} rows of {recipe.window} tokens, each row a stream of "
                 "whole sentences" if recipe.mode == "stream" else "a sentence")
        raise ValueError(f"{corpus} is too small to evaluate: it does not fill one batch of "
                         f"the recipe's {recipe.mode} batches ({batch}).")
    return results


def evaluate(model_dir, corpus, *, tokenizer=None, tfds_data_dir=None):
    """Perplexities (full softmax) of the model trained into `model_dir` on `corpus`.

    Returns a dict of the family's metrics (`Family.evaluation_results`), `loss` and
    `perplexity` among them. ELMo: `forward_perplexity`, `backward_perplexity`, `perplexity`
    (both directions' tokens together), `average_perplexity` (the mean of the two, the paper's
    figure), and `best_perplexity` when the corpus is the built-in one. Masked ELMo:
    `perplexity` (masked LM, on the held-out masking of seed 0).
    """
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"--model {model_dir}: no such directory (a finished training "
                                "run's: what `elmo-tf train --output` wrote).")
    run = RunDirectory(model_dir)
    record = run.record(of="train")
    if record is None or not os.path.exists(run.language_model_file):
        raise ValueError(f"{model_dir} is not a finished training run (it needs run.json and "
                         "language_model.weights.h5, which `elmo-tf train` writes).")
    check_record(record, run.run_file)
    settings = record["settings"]
    recipe = run.recipe()
    vocab = Vocabulary.load(run.vocab_file)
    best = None
    if corpus == BUILTIN_CORPUS:  # the held-out part of the run's own built-in corpus
        corpus = os.path.join(run.path, "corpus", "heldout", "*")
        if recipe.family.next_token_bound:
            best = record.get("best_perplexity")
    corpus_identity(corpus, tfds_data_dir, log=True)  # checked, and its files said
    lm = build_language_model(recipe, len(vocab),
                              xla=use_xla(record.get("xla", "auto")))
    lm.set_vocabulary(vocab.tokens)
    with warnings.catch_warnings():  # the file's optimizer state is not needed here
        warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
        lm.load_weights(run.language_model_file)
    read = {"tokenizer": tokenizer or settings["tokenizer"], "tfds_data_dir": tfds_data_dir}
    results = recipe.family.evaluation_results(
        evaluate_language_model(lm, corpus, vocab, recipe, read))
    if best is not None:
        results["best_perplexity"] = best
    return results


@contextlib.contextmanager
def quiet_end_of_data():
    """Keras warns that "your input ran out of data" at the end of every one-pass evaluation
    dataset (its length is unknown); that end is expected here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        yield


def _steps_per_epoch(recipe, size, pairs):
    """bilm-tf's count: corpus tokens / (rows x window) in stream mode, sentences / rows in
    sentence mode."""
    if recipe.mode == "stream":
        return math.ceil(pairs / (recipe.batch_size * recipe.window))
    return math.ceil(size["sentences"] * recipe.family.copies_per_sentence(recipe)
                     / recipe.batch_size)


def _training_dataset(corpus, vocab, recipe, read, strategy, seed, done,
                      pad_to_buckets):
    """The endless, reproducible batch stream, each worker's share, past the `done` batches a
    resumed run has trained on (`pad_to_buckets`: sentence batches in few shapes, for XLA)."""
    replicas = strategy.num_replicas_in_sync

    def dataset_fn(context):
        sentences = read_corpus(corpus, **read)
        if context.num_input_pipelines > 1:
            sentences = sentences.shard(context.num_input_pipelines, context.input_pipeline_id)
        local = replicas // context.num_input_pipelines  # this worker's replicas
        dataset = recipe.family.training_batches(
            sentences, vocab, recipe, per_replica=context.get_per_replica_batch_size(
                recipe.batch_size), replicas=local, seed=seed, pad_to_buckets=pad_to_buckets)
        return dataset.skip(done * local)

    if replicas > 1:
        return strategy.distribute_datasets_from_function(dataset_fn)
    return dataset_fn(tf.distribute.InputContext())
