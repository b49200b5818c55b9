"""GPU benchmark and checks: pre-training and inference throughput, XLA and TF32 on and off,
parity with bilm-tf, on the GPU TensorFlow sees.

    python bench/gpu.py [--parts parity inference training scaling] [--output FILE]
    python bench/gpu.py --smoke     # tiny shapes on any device: checks this script, writes
                                    # nothing under bench/results

On the project's lent GPU machine (no TensorFlow of its own), from the project root here:

    bash ../shared/gpu/prepare.sh   # then the commands it prints, on the device, then there:
    bash /tmp/asm/device_setup.sh && . /tmp/asm/env.sh \
        && python3 bench/gpu.py --output $OUT/gpu.json

and commit the JSON as `bench/results/gpu.json`. Without a GPU it refuses (GPU figures are never
estimated); CPU figures are `bench/inference.py`'s and `bench/training.py`'s.

What it measures (every figure a median or best of repeated runs in one process):

* parity: the bilm-tf fixture (10 stateful batches, `../shared/fixtures/bilm_tf`) through
  `ElmoBackbone.__call__` and `embed` (XLA on a GPU), largest |difference|, TF32 off and on.
* inference: the `original` shape (random weights) at 1x20, 32x20, 64x40 and 1024x20 tokens:
  `embed` (the default path: XLA, shape buckets) and the plain graph, float32 with TF32 off
  and on, and `mixed_bfloat16`; tokens/s of real tokens with the outputs left on the device
  (and once copied to the host), and the first call's seconds (tracing and compiling). With
  TF32 on also the XLA graph's two parts alone (token encoder; biLM) and the A/B of the LSTM
  gate inputs of all steps at once (the GPU's default) against bounded chunks (the CPU's).
* training: `elmo_original` as the recipe trains it (stream batches of 384 x 20, the released
  793,471-word vocabulary, 8192 sampled negatives, dropout, `SparseAdagrad`), synthetic
  batches from memory: tokens/s of `fit` steps for float32 (TF32 on, off) and
  `mixed_bfloat16`, each with `jit_compile=False` and `True` (the default on one GPU); and
  the step's parts (encoder, LSTM stacks, softmax, update; `bench/training.py`'s, not
  compiled) for float32 with TF32 and for `mixed_bfloat16`.
* scaling (issue 26; not in the default parts): the same `elmo_original` step, float32 with
  TF32, each configuration in its own process (logical devices are set before TensorFlow
  starts): no strategy, `MirroredStrategy` on every visible GPU, and `MirroredStrategy` on 2
  logical GPUs of the first GPU, each with XLA per replica on and off (`CompiledStep`); the
  global batch is the same (384 x 20) everywhere. Tokens/s, and the first step's seconds; the
  no-strategy XLA run twice on one fresh XLA cache directory (`elmo_tf.xla_cache`): cold, then
  warm. Targets: `mirrored` on one GPU >= 0.9x the no-strategy XLA figure, N GPUs >= 0.9 x N x
  one GPU. `--parts scaling --scaling-runs NAME...` runs some of them (`SCALING`).
"""

import argparse
import dataclasses
import datetime
import gc
import json
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.inference import best_seconds, machine, sentences, versions  # noqa: E402
from bench.parity import parity  # noqa: E402
from bench.training import (  # noqa: E402
    dataset, fit_steps, make_language_model, part_functions, synthetic_batch)
from elmo_tf import ElmoBackbone, ElmoConfig, tokens_to_char_ids, xla_cache  # noqa: E402
from elmo_tf.files import write_json_atomically  # noqa: E402
from elmo_tf.ops import lstm as lstm_ops  # noqa: E402
from elmo_tf.recipes.recipe import Recipe  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETUP = ("TensorFlow 2.21's own GPU build (CUDA 12.5, sm_90 kernels JIT-compiled from PTX on "
         "first use) with the lent machine's cuBLAS 13 and cuDNN 9 (CUDA 13 build) standing in "
         "for the CUDA 12 packages `tensorflow[and-cuda]` installs (../shared/gpu/README.md); "
         "not a stock installation.")
FULL = {"inference_preset": "original", "shapes": [(1, 20), (32, 20), (64, 40), (1024, 20)],
        "runs": 5, "recipe": "elmo_original", "batch": 384, "vocabulary": 793_471,
        "warmup_steps": 3, "steps": 10, "xla_warmup_steps": 2, "xla_steps": 3,
        "logical_mib": 30_000}
SMOKE = {"inference_preset": None, "shapes": [(1, 5), (3, 7)], "runs": 2, "recipe": "tiny",
         "batch": 4, "vocabulary": 2_000, "warmup_steps": 1, "steps": 2, "xla_warmup_steps": 1,
         "xla_steps": 2, "logical_mib": None}
TINY_INFERENCE = ElmoConfig(lstm_dim=32, projection_dim=8, n_layers=2, char_embedding_dim=4,
                            filters=((1, 8), (2, 8)), cell_clip=3.0, proj_clip=3.0,
                            use_skip_connections=True, n_highway=1)


def tf32(enabled):
    tf.config.experimental.enable_tensor_float_32_execution(enabled)
    return "tf32_on" if enabled else "tf32_off"


def on_device(outputs):
    """Waits for `outputs` without copying them to the host: one element is read (every output
    comes from one executable, so that waits for all of them)."""
    first = tf.nest.flatten(outputs)[0]
    return first[(0,) * first.shape.rank].numpy()


def inference(settings, save):
    preset = settings["inference_preset"]
    config = ElmoConfig.from_preset(preset) if preset else TINY_INFERENCE
    keras.utils.set_random_seed(0)
    fp32 = ElmoBackbone(config)

    def copy(**kwargs):
        model = ElmoBackbone(config, **kwargs)
        model.set_weights(fp32.get_weights())
        return model

    # XLA reads the TF32 setting when it compiles a shape, and `embed` keeps what it compiled:
    # one model per setting (a model first compiled with TF32 off kept running without it).
    embedders = {False: copy(), True: fp32}
    bf16 = copy(dtype="mixed_bfloat16")
    # The A/B of the LSTM's gate inputs: all steps at once (the GPU's default) against the
    # CPU's bounded chunks (GATE_ROWS_PER_CHUNK["GPU"] = 384 while its graphs are traced).
    default_rows = lstm_ops.GATE_ROWS_PER_CHUNK["GPU"]
    chunked_gates = copy()

    def embed_gates_in_chunks(ids):
        lstm_ops.GATE_ROWS_PER_CHUNK["GPU"] = lstm_ops.GATE_ROWS_PER_CHUNK["CPU"]
        try:
            return chunked_gates.embed(ids)
        finally:
            lstm_ops.GATE_ROWS_PER_CHUNK["GPU"] = default_rows

    spec = tf.TensorSpec([None, None, config.max_characters_per_token], tf.int32)
    plain = tf.function(lambda ids: fp32(ids, training=False)["layers"], input_signature=[spec])
    # The parts of the XLA graph, alone: the token encoder, and the biLM on its output.
    encoder = tf.function(lambda ids: fp32.token_encoder(ids), jit_compile=True)
    bilm = tf.function(lambda x, mask: fp32.bilm(x, mask=mask), jit_compile=True)
    results = {"model": preset or "tiny", "synchronisation": (
        "outputs left on the device (one element read back), except the `_to_host` runs, "
        "which copy outputs['layers'] to NumPy as the 0.1-era runs of this benchmark did"),
        "tokens_per_second": {}, "first_call_seconds": {}}
    for batch, steps in settings["shapes"]:
        ids = tokens_to_char_ids(sentences(batch, steps, seed=batch))
        with_boundaries = tf.pad(ids, [[0, 0], [1, 1], [0, 0]], constant_values=1)
        token_embeddings = encoder(with_boundaries)
        mask = tf.ones(token_embeddings.shape[:2], tf.bool)
        shape = f"{batch}x{steps}"
        for enabled in (False, True):
            setting = tf32(enabled)
            embedder = embedders[enabled]
            runs = {f"embed_fp32_{setting}": lambda: on_device(embedder.embed(ids)["layers"]),
                    f"plain_graph_fp32_{setting}": lambda: on_device(plain(ids))}
            if enabled:
                runs.update({
                    "embed_mixed_bfloat16": lambda: on_device(bf16.embed(ids)["layers"]),
                    "embed_fp32_tf32_on_gates_in_chunks": lambda: on_device(
                        embed_gates_in_chunks(ids)["layers"]),
                    "xla_token_encoder_fp32_tf32_on": lambda: on_device(
                        encoder(with_boundaries)),
                    "xla_bilm_fp32_tf32_on": lambda: on_device(bilm(token_embeddings, mask))})
            else:
                runs["embed_fp32_tf32_off_to_host"] = lambda: embedder.embed(ids)["layers"].numpy()
            for name, fn in runs.items():
                started = time.perf_counter()
                fn()
                results["first_call_seconds"].setdefault(name, {})[shape] = \
                    time.perf_counter() - started
                seconds = best_seconds(fn, settings["runs"])
                results["tokens_per_second"].setdefault(name, {})[shape] = batch * steps / seconds
                save(results)
        print(f"inference {shape}: " + ", ".join(
            f"{k} {v[shape]:.0f}" for k, v in results["tokens_per_second"].items()), flush=True)
    return results


def training(settings, save):
    recipe = dataclasses.replace(Recipe.from_name(settings["recipe"]),
                                 batch_size=settings["batch"], window=20)
    config = {"batch": settings["batch"], "vocabulary": settings["vocabulary"]}
    x, y = synthetic_batch(config, recipe)
    tokens = settings["batch"] * 20
    strategy = tf.distribute.get_strategy()
    results = {"recipe": recipe.name, "batch": f"{settings['batch']}x20",
               "vocabulary": settings["vocabulary"], "num_negatives": recipe.num_negatives,
               "runs": {}}
    for dtype, enabled in ((None, False), (None, True), ("mixed_bfloat16", True)):
        setting = tf32(enabled)
        for jit_compile in (False, True):
            name = f"{dtype or 'float32'}_{setting}_{'xla' if jit_compile else 'no_xla'}"
            keras.utils.set_random_seed(0)
            lm = make_language_model(recipe, config, 1, strategy, dtype)
            lm.compile(optimizer=lm.optimizer, xla=jit_compile)
            data = dataset(x, y, strategy, 1)
            # XLA steps are slow (the issue measured 60x on the LSTM gradient): fewer of them.
            warmup_steps, steps = ((settings["xla_warmup_steps"], settings["xla_steps"])
                                   if jit_compile else
                                   (settings["warmup_steps"], settings["steps"]))
            started = time.perf_counter()
            try:
                fit_steps(lm, data, warmup_steps)
            except Exception as error:  # noqa: BLE001 - recorded, not estimated
                results["runs"][name] = {"status": "failed", "error": str(error)[:2000]}
                save(results)
                print(f"training {name}: FAILED {str(error)[:200]}", flush=True)
                continue
            warmup = time.perf_counter() - started
            timer = fit_steps(lm, data, steps)
            step = float(np.median(timer.seconds))
            run = {"status": "ok", "jit_compile": bool(lm.xla),
                   "warmup_seconds_with_compilation": warmup, "step_seconds_median": step,
                   "step_seconds_all": timer.seconds, "tokens_per_second": tokens / step,
                   "final_logs": timer.logs}
            if enabled and not jit_compile:  # where time goes, float32 (TF32) and bfloat16
                functions, _ = part_functions(lm, tf.nest.map_structure(tf.constant, x), y)
                run["parts_seconds"] = {}
                for part, fn in functions.items():
                    fn()
                    run["parts_seconds"][part] = best_seconds(fn, 3)
            results["runs"][name] = run
            save(results)
            print(f"training {name}: {tokens / step:.0f} tokens/s (step {step:.3f} s)",
                  flush=True)
            del lm, data
            keras.backend.clear_session()
            gc.collect()
    return results


# name: (strategy, logical devices made of the first device or None, xla); a name ending in
# "_warm" repeats the run before it on the same XLA cache directory.
SCALING = {
    "no_strategy_xla": ("default", None, "on"),
    "no_strategy_xla_warm": ("default", None, "on"),
    "no_strategy_no_xla": ("default", None, "off"),
    "mirrored_all_xla": ("mirrored", None, "on"),
    "mirrored_all_no_xla": ("mirrored", None, "off"),
    "mirrored_2_logical_xla": ("mirrored", 2, "on"),
    "mirrored_2_logical_no_xla": ("mirrored", 2, "off"),
}


def scaling(settings, save, names, smoke):
    """Runs each configuration of `names` in a child process (`--scaling-run`), in order."""
    import subprocess

    results = {"recipe": settings["recipe"], "batch": f"{settings['batch']}x20",
               "vocabulary": settings["vocabulary"], "runs": {}}
    cache = tempfile.mkdtemp(prefix="xla-cache-")
    for name in names:
        if not name.endswith("_warm"):
            cache = tempfile.mkdtemp(prefix="xla-cache-")  # cold
        command = [sys.executable, os.path.abspath(__file__), "--scaling-run", name]
        if smoke:
            command.append("--smoke")
        env = xla_cache.child_environment(cache)
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False,
                              timeout=1800)
        lines = [x for x in done.stdout.splitlines() if x.startswith("SCALING ")]
        if done.returncode or not lines:
            results["runs"][name] = {"status": "failed", "error": done.stderr[-2000:]}
        else:
            results["runs"][name] = {"status": "ok", **json.loads(lines[-1][len("SCALING "):])}
        save(results)
        print(f"scaling {name}: {results['runs'][name].get('tokens_per_second', 'failed')}",
              flush=True)
    runs = results["runs"]

    def ratio(a, b):
        if runs.get(a, {}).get("status") == runs.get(b, {}).get("status") == "ok":
            return runs[a]["tokens_per_second"] / runs[b]["tokens_per_second"]
        return None

    results["ratios"] = {
        "mirrored_all_xla / no_strategy_xla": ratio("mirrored_all_xla", "no_strategy_xla"),
        "mirrored_all_no_xla / no_strategy_xla": ratio("mirrored_all_no_xla",
                                                       "no_strategy_xla"),
        "mirrored_2_logical_xla / no_strategy_xla": ratio("mirrored_2_logical_xla",
                                                          "no_strategy_xla"),
        "mirrored_all_xla / mirrored_all_no_xla": ratio("mirrored_all_xla",
                                                        "mirrored_all_no_xla")}
    return results


def scaling_run(name, settings, smoke):
    """One configuration of `SCALING`, in this fresh process: prints `SCALING {json}`."""
    strategy_name, logical, xla = SCALING[name]
    kind = "CPU" if smoke else "GPU"
    devices = tf.config.list_physical_devices(kind)
    if logical:  # before anything starts the runtime
        config = (tf.config.LogicalDeviceConfiguration() if smoke else
                  tf.config.LogicalDeviceConfiguration(memory_limit=settings["logical_mib"]))
        tf.config.set_logical_device_configuration(devices[0], [config] * logical)
    if strategy_name == "default":
        strategy = tf.distribute.get_strategy()
    elif smoke and not logical:
        strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    else:
        strategy = tf.distribute.MirroredStrategy(
            [d.name for d in tf.config.list_logical_devices(kind)])
    replicas = strategy.num_replicas_in_sync
    recipe = dataclasses.replace(Recipe.from_name(settings["recipe"]),
                                 batch_size=settings["batch"], window=20)
    config = {"batch": settings["batch"], "vocabulary": settings["vocabulary"]}
    x, y = synthetic_batch(config, recipe)
    keras.utils.set_random_seed(0)
    started = time.perf_counter()
    lm = make_language_model(recipe, config, replicas, strategy)
    with strategy.scope():
        lm.compile(optimizer=lm.optimizer, xla=xla == "on")
    data = dataset(x, y, strategy, replicas)
    first = fit_steps(lm, data, 1)
    to_first_step = time.perf_counter() - started
    warmup = fit_steps(lm, data, settings["warmup_steps"])
    timer = fit_steps(lm, data, settings["steps"])
    step = float(np.median(timer.seconds))
    print("SCALING " + json.dumps({
        "strategy": strategy_name, "replicas": replicas, "xla": xla,
        "devices": [d.name for d in tf.config.list_logical_devices(kind)],
        "seconds_to_first_step": to_first_step, "first_step_seconds": first.seconds[0],
        "warmup_step_seconds": warmup.seconds,
        "step_seconds_median": step, "step_seconds_all": timer.seconds,
        "tokens_per_second": settings["batch"] * 20 / step,
        "loss": timer.logs.get("loss")}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["parity", "inference", "training"],
                        choices=["parity", "inference", "training", "scaling"])
    parser.add_argument("--scaling-runs", nargs="+", choices=list(SCALING),
                        default=list(SCALING), help="the scaling part's configurations")
    parser.add_argument("--scaling-run", choices=list(SCALING), help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes on any device, to check the script")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    if args.scaling_run:  # a child of the scaling part, before anything lists devices
        scaling_run(args.scaling_run, SMOKE if args.smoke else FULL, args.smoke)
        return
    gpus = tf.config.list_logical_devices("GPU")
    if not gpus and not args.smoke:
        sys.exit("bench/gpu.py: no GPU visible to TensorFlow; GPU figures are never estimated "
                 "(see ../shared/gpu/README.md to run it on a lent GPU, or --smoke).")
    settings = SMOKE if args.smoke else FULL
    started = time.perf_counter()
    report = {"benchmark": "gpu", "smoke": args.smoke,
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "command": " ".join(["python"] + sys.argv), "machine": machine(),
              "gpu_devices": [tf.config.experimental.get_device_details(d)
                              for d in tf.config.list_physical_devices("GPU")],
              "versions": versions(), "setup": SETUP if gpus else "no GPU: smoke run"}
    output = args.output or (os.path.join(tempfile.gettempdir(), "gpu-smoke.json") if args.smoke
                             else str(ROOT / "bench" / "results" / "gpu.json"))
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)

    def save(part, results, complete=False):
        """Writes what is measured so far (a run cut short by a time limit keeps its figures)."""
        report[part] = results
        report["complete"] = complete
        report["wall_seconds"] = time.perf_counter() - started
        write_json_atomically(output, json.loads(json.dumps(report, default=str)))

    for part in args.parts:
        run = {"parity": lambda save: parity((False, True)),
               "inference": lambda save: inference(settings, save),
               "training": lambda save: training(settings, save),
               "scaling": lambda save: scaling(settings, save, args.scaling_runs,
                                               args.smoke)}[part]
        save(part, run(lambda results, part=part: save(part, results)))
    tf32(True)
    save(args.parts[-1], report[args.parts[-1]], complete=True)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
