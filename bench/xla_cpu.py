"""XLA on this machine's CPU (issue 26): the training step with and without XLA per replica,
and what the persistent XLA cache (`elmo_tf.xla_cache`) saves.

    python bench/xla_cpu.py [--parts step cache] [--recipe elmo_cpu] [--output FILE]

* step: `elmo-tf train --recipe R --steps 300` on the real-text pre-training sentences
  (`bench/real_text.py`), `--xla off` and `--xla on`, the XLA run on a cache the first one
  filled (so that no batch shape compiles during it); the steady seconds per step each run
  recorded (run.json's `speed`: `bench/pretraining_value.steady_seconds_per_step`, the
  protocol's calibration), and their ratio.
* cache: the wall seconds of the same commands with the cache off, cold (an empty cache
  directory) and warm (the directory the cold run filled). The commands, each in its own
  process, on the built-in corpus, XLA per replica on:

    elmo-tf train --recipe R --corpus builtin --steps S --xla on   # a fresh run each time; its
                                          # sentence batches compile one step per length bucket,
                                          # and the held-out evaluation its own shapes
    elmo-tf evaluate --model RUN --corpus builtin                   # the run's XLA setting

(`embed` compiles with XLA on a GPU only, where the cache serves it too; not measured here.)
A command's seconds with the cache off minus its seconds with a warm cache is about what it
spent compiling. Writes `bench/results/xla_cpu.json` (machine, versions, command).
"""

import argparse
import datetime
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.inference import machine, versions  # noqa: E402
from bench.pretraining_value import CLI, run, steady_seconds_per_step  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402
from elmo_tf.files import write_json_atomically  # noqa: E402
from elmo_tf import xla_cache  # noqa: E402

CACHES = ("off", "cold", "warm")


def step(recipe, steps, work, data_dir):
    """Steady seconds per step without and with XLA (warm cache)."""
    paths = prepare(data_dir)
    cache = os.path.join(work, "step-cache")
    results = {"steps": steps}
    env = xla_cache.child_environment(cache)
    for name, xla in (("compile", "on"), ("off", "off"), ("on", "on")):
        log = os.path.join(work, f"step-{name}.log")
        run([*CLI, "train", "--recipe", recipe, "--corpus", paths["lm_train"], "--output",
             os.path.join(work, f"step-{name}"), "--steps", str(steps), "--checkpoint-every",
             str(steps), "--xla", xla], log=log, env=env)
        if name != "compile":  # the first run only fills the cache with the batch shapes
            results[f"xla_{name}_seconds_per_step"] = round(
                steady_seconds_per_step(os.path.join(work, f"step-{name}")), 4)
    results["xla_speedup"] = round(results["xla_off_seconds_per_step"]
                                   / results["xla_on_seconds_per_step"], 3)
    print(f"step: XLA off {results['xla_off_seconds_per_step']:.3f} s, on "
          f"{results['xla_on_seconds_per_step']:.3f} s ({results['xla_speedup']:.2f}x)")
    return results


def cache(recipe, steps, work):
    """Wall seconds of train and evaluate with the cache off, cold and warm."""
    directory = os.path.join(work, "cache")
    seconds = {}
    for state in CACHES:
        env = xla_cache.child_environment(directory if state != "off" else "off")
        output = os.path.join(work, f"run-{state}")
        commands = {
            "train": [*CLI, "train", "--recipe", recipe, "--corpus", "builtin", "--output",
                      output, "--steps", str(steps), "--checkpoint-every", str(steps),
                      "--xla", "on"],
            "evaluate": [*CLI, "evaluate", "--model", output, "--corpus", "builtin"]}
        for name, command in commands.items():
            wall, _ = run(command, log=os.path.join(work, f"{name}-{state}.log"), env=env)
            seconds.setdefault(name, {})[state] = round(wall, 1)
            print(name, state, f"{wall:.1f} s", flush=True)
    return {"train_steps": steps, "wall_seconds": seconds,
            "cache_entries_written": sum(len(files) for _, _, files in os.walk(directory)),
            "saved_by_the_warm_cache_seconds": {
                name: round(s["off"] - s["warm"], 1) for name, s in seconds.items()},
            "warm_over_off": {name: round(s["warm"] / s["off"], 3)
                              for name, s in seconds.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=["step", "cache"],
                        default=["step", "cache"])
    parser.add_argument("--recipe", default="elmo_cpu")
    parser.add_argument("--step-steps", type=int, default=300)
    parser.add_argument("--cache-steps", type=int, default=20)
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "xla_cpu.json"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="xla-cpu-bench-")
    report = {"benchmark": "xla_cpu", "recipe": args.recipe}
    try:
        if "step" in args.parts:
            report["step"] = step(args.recipe, args.step_steps, work, args.data_dir)
        if "cache" in args.parts:
            report["cache"] = cache(args.recipe, args.cache_steps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.update({
        "command": " ".join(["python"] + sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions()})
    write_json_atomically(args.output, report)
    print(f"wrote {args.output}")
    for name, s in report.get("cache", {}).get("wall_seconds", {}).items():
        print(f"{name:9s} off {s['off']:7.1f} s  cold {s['cold']:7.1f} s  warm {s['warm']:7.1f} s")


if __name__ == "__main__":
    main()
