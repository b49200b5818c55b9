"""Issue 25's perplexity check: `elmo_cpu` pre-trained on the real-text corpus against the
interpolated Kneser-Ney 5-gram on the same held-out sentences, in at most 30 minutes of this
machine.

    python bench/elmo_cpu_in_30_minutes.py [--steps 3700] [--xla auto] [--runs DIR]
        [--output FILE]

One `elmo-tf train --recipe elmo_cpu --steps N --xla X` (by default the recipe's own run:
3,700 steps, `--xla auto`, which compiles a CPU run that long) from nothing on the pre-training
sentences of `bench/real_text.py` (fetched from PyPI at run time, never committed), with a cold
XLA cache (an empty `ELMO_TF_XLA_CACHE` directory: the compilation of every batch shape is in
the wall time), then `elmo-tf evaluate` on the held-out sentences (full softmax), then the
5-gram and unigram baselines on the run's vocabulary (`bench/downstream.ngram_baselines`: the
same sentences, vocabulary and conventions). The steps are fixed before the run (3700: this
machine's steady XLA step, 0.42 s, for 26 minutes, and about 3 minutes of compilation); the
wall time says whether they fit. Writes `bench/results/elmo_cpu_in_30_minutes-cpu.json`
(machine, versions, command).
"""

import argparse
import datetime
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.downstream import ngram_baselines  # noqa: E402
from bench.inference import machine, versions  # noqa: E402
from bench.pretraining_value import CLI, _json, run  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402
from elmo_tf.files import write_json_atomically  # noqa: E402
from elmo_tf import xla_cache  # noqa: E402

BUDGET_SECONDS = 30 * 60


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3700)
    parser.add_argument("--xla", choices=["auto", "on", "off"], default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--runs", default=os.path.join(
        os.path.expanduser("~"), ".cache", "elmo_tf", "elmo_cpu_in_30_minutes"))
    parser.add_argument("--output", default=os.path.join(
        ROOT, "bench", "results", "elmo_cpu_in_30_minutes-cpu.json"))
    args = parser.parse_args()
    paths = prepare(args.data_dir)
    output = os.path.join(args.runs, f"xla-{args.xla}-steps-{args.steps}-seed-{args.seed}")
    shutil.rmtree(output, ignore_errors=True)  # from nothing: no resumed run
    cache = tempfile.mkdtemp(prefix="xla-cache-")
    env = xla_cache.child_environment(cache)
    try:
        wall, cpu = run([*CLI, "train", "--recipe", "elmo_cpu", "--corpus", paths["lm_train"],
                         "--output", output, "--steps", str(args.steps), "--checkpoint-every",
                         str(args.steps), "--seed", str(args.seed), "--xla", args.xla],
                        log=os.path.join(args.runs, "train.log"), env=env)
        scores = os.path.join(args.runs, "heldout.json")
        run([*CLI, "evaluate", "--model", output, "--corpus", paths["lm_heldout"], "--json",
             scores], log=os.path.join(args.runs, "evaluate.log"), env=env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    heldout = _json(scores)
    record = _json(os.path.join(output, "run.json"))  # --xla auto's decision, its step times
    baselines = ngram_baselines(paths, os.path.join(output, "vocab.txt"))
    kneser_ney = baselines["kneser_ney_5gram"]["perplexity"]
    report = {
        "benchmark": "elmo_cpu_in_30_minutes", "recipe": "elmo_cpu", "steps": args.steps,
        "xla": args.xla, "xla_compiled": record["xla_compiled"],
        "speed": {k: record["speed"][k] for k in ("first_step_seconds",
                                                  "steady_seconds_per_step")},
        "seed": args.seed, "train_wall_seconds": round(wall, 1),
        "train_cpu_seconds": round(cpu, 1), "within_30_minutes": wall <= BUDGET_SECONDS,
        "heldout": heldout, "baselines": baselines,
        "forward_perplexity_over_kneser_ney": round(heldout["forward_perplexity"] / kneser_ney,
                                                    4),
        "below_kneser_ney_within_30_minutes": bool(
            wall <= BUDGET_SECONDS and heldout["forward_perplexity"] < kneser_ney),
        "command": " ".join(["python"] + sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions()}
    write_json_atomically(args.output, report)
    print(f"elmo_cpu, {args.steps} steps, XLA {args.xla}: {wall / 60:.1f} minutes of training, "
          f"held-out forward perplexity {heldout['forward_perplexity']:.1f}; Kneser-Ney 5-gram "
          f"{kneser_ney:.1f}, unigram {baselines['unigram']['perplexity']:.1f}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
