"""Fine-tuning with and without XLA (issue 36): the probes of `bench/pretraining_value.py`
(its settings, its three real-text tasks with their test splits) run by `elmo-tf finetune
--xla on` and `--xla off` on the same biLM, one after the other, each a fresh process: the wall
seconds of the whole command (start-up, XLA's compilations and every dev scoring included),
the epochs run, and the scores (the same model: equal up to float rounding and XLA's random
draws, as the dropout draws differ).

    python bench/finetune_xla.py --model RUN_DIR [--tasks wsj_pos_tagging ...] \
        [--output bench/results/finetune_xla-cpu.json]

`--model`: a biLM directory (options.json, weights.hdf5): a kept protocol run, or
`elmo-tf init --preset elmo_small --output DIR` (random weights time the same). On a GPU
(`bench/gpu_pretraining_value.sh` prints the command), XLA is what `--xla auto` picks.
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.inference import machine, versions  # noqa: E402
from bench.pretraining_value import (  # noqa: E402
    PROBE,
    PROBE_CLASSIFY,
    TASKS,
    _finetune,
    _flags,
    _json,
    _scores,
    _speed,
)
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the biLM's directory")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--xla", nargs="+", choices=["on", "off"], default=["on", "off"],
                        help="in this order, per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="where the runs go (default: MODEL/xla)")
    parser.add_argument("--output", help="the JSON report (default: stdout only)")
    args = parser.parse_args(argv)
    paths = prepare(args.data_dir)
    work = args.work or os.path.join(args.model, "xla")
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    from elmo_tf.files import write_json_atomically  # (as bench/pretraining_value.py: late)
    report = {"benchmark": "finetune_xla", "command": " ".join(sys.argv),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
              "versions": versions(), "model": os.path.abspath(args.model),
              "probe_settings": {**PROBE, "classify": PROBE_CLASSIFY}, "tasks": {}}
    for task in args.tasks:
        kind, metric = TASKS[task][0], TASKS[task][3]
        flags = _flags({**PROBE, **(PROBE_CLASSIFY if kind == "classify" else {})})
        runs = report["tasks"].setdefault(task, {"metric": metric})
        for xla in args.xla:
            output = os.path.join(work, task, xla)
            wall, cpu = _finetune(paths, args.model, task, args.seed, output,
                                  flags + ["--xla", xla])
            metrics = _json(os.path.join(output, "dev_metrics.json"))
            runs[xla] = {"seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
                         "epochs": metrics["epochs"], "compiled": metrics["xla"],
                         **_scores(output, metric), "speed": _speed(output)}
            print(task, xla, runs[xla], flush=True)
            if {"on", "off"} <= set(runs):
                runs["off_over_on"] = round(runs["off"]["seconds"] / runs["on"]["seconds"], 2)
            if args.output:  # after each run: a stopped benchmark keeps what ran
                write_json_atomically(args.output, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
