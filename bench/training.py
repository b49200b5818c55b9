"""Training benchmark: throughput of the biLM pre-training step (`ElmoLanguageModel.fit`) on CPU.

    python bench/training.py [--quick] [--repeats N] [--configs tiny ...] [--output FILE]
    python bench/training.py --config tiny --replicas 2 --json-line    # one configuration

The parent runs every configuration in its own subprocess (a `MirroredStrategy` over logical
CPU devices must be configured before TensorFlow starts its devices) and writes one JSON file.
A configuration is a named recipe's model (`tiny`, `elmo_small`, `elmo_original`), stream
batches of `window` 20 with the recipe's dropout, sampled softmax and Adagrad (lr, initial
accumulator, global-norm clip) as `elmo_tf.recipes.train` builds them (`build_language_model`,
then `compile` with the recipe's Adagrad), fed synthetic batches shaped like
`language_model_dataset`'s output from a repeated in-memory `tf.data` dataset, so the input
pipeline costs nothing. The batch is smaller than the recipes' 384 rows for the big shapes (a
step must take seconds on 2 cores); the JSON says which. `elmo_small`/`elmo_original` use the
released 793,471-word vocabulary with 8192 sampled negatives, `tiny` a 340-word vocabulary and
the full softmax.

Tokens/s count every position of a stream batch once (B rows x T window = B*T tokens), although
each is predicted in both directions. Step times come from `fit` itself (a callback reads the
loss of every step, so the step has finished); after a warm-up `fit`, every repeat runs a few
steps, then (single replica) times the parts of the step on the same batch, each a tf.function
that computes that part's forward pass and its gradient:

    encoder    char CNN + highways + projection of both directions' tokens, gradient w.r.t.
               its weights (upstream gradient: a fixed random tensor)
    lstms      both LSTM stacks (dropout, stateful) from fixed token embeddings, gradient
               w.r.t. their weights and the embeddings
    softmax    the sampled (or full) softmax and loss from a fixed top layer, gradient w.r.t.
               the softmax and the top layer
    fwd+bwd    the whole forward pass and every gradient (`train_step` minus the update)
    update     `optimizer.apply` of those gradients (`elmo_tf.optimizers.SparseAdagrad` with
               global-norm clipping, as `fit` uses it)

each reported as a fraction of the median `fit` step measured in the same repeat. As the
baseline it also times `keras.optimizers.Adagrad`'s update of the same gradients (same
settings, its own accumulators), which densifies the softmax's row-sparse gradient and updates
every row of the table. Repeats interleave all of this with a 2048^3 fp32 GEMM
probe of how much of the machine the process got (it is shared and noisy); the process's CPU
seconds per step are recorded too (tokens per CPU-second are less sensitive to other
processes). Figures are medians over repeats, with the best step too. `elmo_small` also trains
a `mixed_bfloat16` copy, alternating single steps with the float32 one. GPU figures are
recorded as missing where no GPU is visible. The parent stops a configuration's process when
the machine's available memory falls below 1.5 GiB (the dense softmax updates of the released
vocabulary take many GiB) and tries it once more; one that still fails is recorded as failed,
with the reason.
"""

import argparse
import dataclasses
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.inference import best_seconds, gemm_rate, machine, versions
from elmo_tf import tokens_to_char_ids
from elmo_tf.recipes.recipe import Recipe
from elmo_tf.training import build_language_model, make_strategy

RELEASED_VOCABULARY = 793_471  # the 1B Word Benchmark vocabulary of the released models
WINDOW = 20
# batch: global rows (the recipes use 384: too slow here); steps: fit steps per repeat.
# repeats: the default number of interleaved repeats; parts_best_of: runs per part per repeat.
CONFIGS = {
    "tiny": {"recipe": "tiny", "batch": 32, "vocabulary": 340, "steps": 10, "repeats": 3,
             "parts_best_of": 3},
    "elmo_small": {"recipe": "elmo_small", "batch": 32, "vocabulary": RELEASED_VOCABULARY,
                   "steps": 3, "repeats": 2, "parts_best_of": 2},
    "elmo_original": {"recipe": "elmo_original", "batch": 16,
                      "vocabulary": RELEASED_VOCABULARY, "steps": 2, "repeats": 2,
                      "parts_best_of": 2},
}
PARTS = ("encoder", "lstms", "softmax", "forward_backward", "update")
CHILD_TIMEOUT_S = 1200
# A configuration's process is stopped when the machine's available memory falls below this
# (the machine is shared; the big vocabulary's dense updates take many GiB).
MEMORY_FLOOR_BYTES = int(1.5 * 2**30)
RESULT_PREFIX = "RESULT "


# --- one configuration (child process) ---------------------------------------------------
def synthetic_batch(config, recipe, seed=0):
    """A stream batch like `language_model_dataset`'s: two directions' char ids, targets."""
    rng = np.random.default_rng(seed)
    batch, vocabulary = config["batch"], config["vocabulary"]
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))

    def words():
        lengths = rng.integers(1, 11, size=batch * WINDOW)
        return np.array(["".join(rng.choice(letters, n)) for n in lengths]).reshape(batch, WINDOW)

    def targets():  # log-uniform, like a frequency-sorted vocabulary's Zipfian ids
        ids = np.floor(np.exp(rng.uniform(0, np.log(vocabulary + 1), (batch, WINDOW)))) - 1
        return np.clip(ids, 0, vocabulary - 1).astype(np.int32)

    chars = recipe.model.max_characters_per_token
    x = {"char_ids": tokens_to_char_ids(words(), chars).numpy(),
         "backward_char_ids": tokens_to_char_ids(words(), chars).numpy()}
    y = {"forward_targets": targets(), "backward_targets": targets()}
    return x, y


def dataset(x, y, strategy, replicas):
    """The batch repeated; with replicas, each replica gets its consecutive rows every step (as
    `elmo_tf.recipes.train` deals them, through `distribute_datasets_from_function`)."""
    if replicas == 1:
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    def split(t):
        return t.reshape((replicas, t.shape[0] // replicas) + t.shape[1:])

    parts = tf.nest.map_structure(split, (x, y))
    return strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensor_slices(parts).repeat())


class StepTimer(keras.callbacks.Callback):
    """Wall seconds, process CPU seconds (all threads), of which system (kernel) seconds, and
    minor page faults of every `fit` step, from batch begin to batch end (the loss read back)."""

    def __init__(self):
        super().__init__()
        self.seconds, self.cpu_seconds, self.system_seconds, self.page_faults = [], [], [], []
        self.logs = {}
        self._start = None

    @staticmethod
    def _now():
        times = os.times()
        return (time.perf_counter(), times.user + times.system, times.system,
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt)

    def on_train_batch_begin(self, batch, logs=None):
        self._start = self._now()

    def on_train_batch_end(self, batch, logs=None):
        self.logs = {k: float(v) for k, v in (logs or {}).items()}  # waits for the step
        deltas = [b - a for a, b in zip(self._start, self._now())]
        for samples, value in zip((self.seconds, self.cpu_seconds, self.system_seconds,
                                   self.page_faults), deltas):
            samples.append(value)


def fit_steps(lm, data, steps):
    timer = StepTimer()
    lm.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[timer], shuffle=False)
    return timer


def make_language_model(recipe, config, replicas, strategy, dtype=None):
    with strategy.scope():
        lm = build_language_model(recipe, config["vocabulary"], replicas, dtype)  # compiled
        lm.optimizer.build(lm.trainable_variables)
    return lm


def finish(value):
    """Blocks until every tensor in `value` is computed (reads one element of each)."""
    for t in tf.nest.flatten(value, expand_composites=True):
        if t is not None and t.dtype.is_floating:
            tf.reshape(t, [-1])[:1].numpy()


def kind(gradient):
    return "IndexedSlices" if isinstance(gradient, tf.IndexedSlices) else "dense Tensor"


def graph_op_counts(concrete, names):
    """How many ops of each type in `names` a concrete function's graph (and its nested function
    bodies) holds."""
    counts = dict.fromkeys(names, 0)
    graphs = [concrete.graph.as_graph_def()]
    for graph in graphs:
        nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
        for node in nodes:
            if node.op in counts:
                counts[node.op] += 1
    return counts


def part_functions(lm, x, y):
    """The tf.functions timed as the step's parts (see the module docstring), and probes."""
    backbone = lm.backbone
    encoder_vars = backbone.token_encoder.trainable_variables
    lstm_vars = backbone.bilm.trainable_variables
    softmax_vars = [lm.softmax.kernel, lm.softmax.bias]
    ids = tf.concat([x["char_ids"], x["backward_char_ids"]], 0)
    batch = x["char_ids"].shape[0]
    rng = tf.random.Generator.from_seed(1)
    embeddings = tf.function(backbone.token_encoder)(ids)
    mask = tf.reduce_any(x["char_ids"] > 0, -1)
    top = lm(x, training=True)
    upstream_embeddings = rng.normal(embeddings.shape, dtype=embeddings.dtype)
    upstream_top = rng.normal(top.shape)

    @tf.function
    def encoder(ids):
        with tf.GradientTape() as tape:
            out = backbone.token_encoder(ids)
            loss = tf.reduce_sum(tf.cast(out, tf.float32) * tf.cast(upstream_embeddings,
                                                                     tf.float32))
        return tape.gradient(loss, encoder_vars)

    @tf.function
    def lstms(forward, backward):
        with tf.GradientTape() as tape:
            tape.watch([forward, backward])
            layers = backbone.bilm(forward, mask=mask, backward_token_embeddings=backward,
                                   training=True)
            out = tf.cast(layers[:, -1], tf.float32)
            if backbone.dropout > 0:  # as ElmoLanguageModel.call does on the top layer
                out = tf.nn.dropout(out, rate=backbone.dropout)
            loss = tf.reduce_sum(out * upstream_top)
        return tape.gradient(loss, lstm_vars + [forward, backward])

    @tf.function
    def softmax(top):
        with tf.GradientTape() as tape:
            tape.watch(top)
            loss = lm.compute_loss(x=None, y=y, y_pred=top, training=True)
        return tape.gradient(loss, softmax_vars + [top])

    @tf.function
    def forward_backward(x):
        with tf.GradientTape() as tape:
            out = lm(x, training=True)
            loss = lm.compute_loss(x=x, y=y, y_pred=out, training=True)
        return tape.gradient(loss, lm.trainable_variables)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grads = forward_backward(x)
    kernel_index = next(i for i, v in enumerate(lm.trainable_variables)
                        if v is lm.softmax.kernel)
    gradient_kind = kind(grads[kernel_index])

    @tf.function
    def update(grads):  # what fit's train_step does after the gradients
        lm.optimizer.apply(grads, lm.trainable_variables)

    settings = lm.optimizer.get_config()
    keras_adagrad = keras.optimizers.Adagrad(
        settings["learning_rate"], initial_accumulator_value=settings[
            "initial_accumulator_value"], global_clipnorm=settings["global_clipnorm"])
    keras_adagrad.build(lm.trainable_variables)

    @tf.function
    def keras_update(grads):  # the baseline (on the same variables)
        keras_adagrad.apply(grads, lm.trainable_variables)

    with warnings.catch_warnings(record=True) as update_warnings:
        warnings.simplefilter("always")
        update(grads)
        keras_update(grads)
    op_names = ("UnsortedSegmentSum", "ResourceScatterAdd", "ResourceScatterSub",
                "AssignAddVariableOp", "AssignSubVariableOp")
    densify = [str(w.message) for w in caught + update_warnings
               if "IndexedSlices" in str(w.message)]
    sparsity = {
        "softmax_kernel_gradient_from_tape": gradient_kind,
        "softmax_kernel_gradient_rows": (int(grads[kernel_index].indices.shape[0])
                                         if gradient_kind == "IndexedSlices" else None),
        "softmax_kernel_gradient_unique_rows": (
            int(tf.size(tf.unique(grads[kernel_index].indices)[0]))
            if gradient_kind == "IndexedSlices" else None),
        # Traced only (not run): what Keras's clipping makes of it.
        "after_keras_global_clipnorm": kind(tf.function(
            lambda g: keras_adagrad._clip_gradients([g])[0]).get_concrete_function(
                grads[kernel_index]).structured_outputs),
        "update_graph_ops": graph_op_counts(update.get_concrete_function(grads), op_names),
        "keras_adagrad_update_graph_ops": graph_op_counts(
            keras_update.get_concrete_function(grads), op_names),
        "warnings_while_tracing_parts": sorted(set(densify)),
    }
    forward = embeddings[:batch]
    backward = embeddings[batch:]
    functions = {
        "encoder": lambda: finish(encoder(ids)),
        "lstms": lambda: finish(lstms(forward, backward)),
        "softmax": lambda: finish(softmax(top)),
        "forward_backward": lambda: finish(forward_backward(x)),
        "update": lambda: finish(update(grads)),
        "update_keras_adagrad_baseline": lambda: finish(keras_update(grads)),
    }
    return functions, sparsity


def peak_rss():
    with open("/proc/self/status") as f:
        return int(f.read().split("VmHWM:")[1].split()[0]) * 1024


def run_config(name, replicas, repeats, quick):
    """Measures one configuration; returns a JSON-able dict."""
    rss = {}
    strategy = tf.distribute.get_strategy()
    if replicas > 1:
        # make_strategy as committed (967994c) lists the logical devices before it splits the
        # CPU, which starts TensorFlow's devices, so its own split always failed; splitting
        # here first works with that version and with the one that configures first.
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * replicas)
        strategy = make_strategy("mirrored", replicas)
    config = CONFIGS[name]
    recipe = dataclasses.replace(Recipe.from_name(config["recipe"]), batch_size=config["batch"],
                                 window=WINDOW)
    keras.utils.set_random_seed(0)
    started = time.perf_counter()
    lm = make_language_model(recipe, config, replicas, strategy)
    build_seconds = time.perf_counter() - started
    rss["after_build"] = peak_rss()
    x, y = synthetic_batch(config, recipe)
    data = dataset(x, y, strategy, replicas)
    tokens = config["batch"] * WINDOW

    bf16 = None
    if name == "elmo_small" and replicas == 1 and not quick:
        bf16 = make_language_model(recipe, config, replicas, strategy, "mixed_bfloat16")
        bf16.set_weights(lm.get_weights())
        bf16_data = dataset(x, y, strategy, replicas)

    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warmup_seconds = fit_steps(lm, data, 2).seconds  # traces train_function
    first_fit_seconds = time.perf_counter() - started
    fit_densify_warnings = sorted({str(w.message) for w in caught
                                   if "IndexedSlices" in str(w.message)})
    rss["after_warmup_fit"] = peak_rss()
    if bf16 is not None:
        fit_steps(bf16, bf16_data, 2)

    functions, sparsity = {}, None
    if replicas == 1:
        started = time.perf_counter()
        xt = tf.nest.map_structure(tf.constant, x)
        functions, sparsity = part_functions(lm, xt, y)
        for fn in functions.values():
            fn()
        parts_trace_seconds = time.perf_counter() - started
        rss["after_tracing_parts"] = peak_rss()
    probe = gemm_rate(tf.float32, 2048)  # how much of the shared machine this process gets

    samples = {"step": [], "cpu": [], "system": [], "faults": [], "step_median": [], "gemm": [],
               "bf16_step": [], "bf16_ratio": [], "bf16_cpu_ratio": []}
    samples.update({k: [] for k in functions})
    logs = {}
    for repeat in range(repeats):
        samples["gemm"].append(probe())
        if bf16 is None:
            timer = fit_steps(lm, data, config["steps"])
            seconds, logs = timer.seconds, timer.logs
            samples["cpu"] += timer.cpu_seconds
            samples["system"] += timer.system_seconds
            samples["faults"] += timer.page_faults
        else:  # float32 and bfloat16 steps alternate, one by one
            seconds = []
            for _ in range(config["steps"]):
                timer = fit_steps(lm, data, 1)
                seconds += timer.seconds
                samples["cpu"] += timer.cpu_seconds
                samples["system"] += timer.system_seconds
                samples["faults"] += timer.page_faults
                logs = timer.logs
                bf16_timer = fit_steps(bf16, bf16_data, 1)
                samples["bf16_step"] += bf16_timer.seconds
                samples["bf16_ratio"].append(timer.seconds[0] / bf16_timer.seconds[0])
                samples["bf16_cpu_ratio"].append(timer.cpu_seconds[0]
                                                 / bf16_timer.cpu_seconds[0])
                bf16_logs = bf16_timer.logs
        samples["step"] += seconds
        samples["step_median"].append(float(np.median(seconds)))
        for key, fn in functions.items():
            samples[key].append(best_seconds(fn, config["parts_best_of"]))
        print(f"[{name} x{replicas}] repeat {repeat + 1}/{repeats}: step "
              f"{np.median(seconds):.3f}s", file=sys.stderr, flush=True)

    step = np.array(samples["step"])
    result = {
        "config": name, "replicas": replicas, "recipe": recipe.name,
        "model": recipe.model.to_options(), "mode": recipe.mode,
        "global_batch_rows": config["batch"], "rows_per_replica": config["batch"] // replicas,
        "window": WINDOW, "tokens_per_step": tokens,
        "recipe_batch_rows": Recipe.from_name(config["recipe"]).batch_size,
        "vocabulary_size": config["vocabulary"], "num_negatives": recipe.num_negatives,
        "softmax": "sampled" if lm.softmax.samples else "full",
        "dropout": recipe.dropout,
        "optimizer": {"name": type(lm.optimizer).__name__, "learning_rate": recipe.learning_rate,
                      "initial_accumulator_value": recipe.initial_accumulator_value,
                      "global_clipnorm": recipe.clip_norm},
        "xla": bool(lm.xla),
        "parameters": int(lm.count_params()),
        "build_seconds": build_seconds, "first_fit_seconds_2_steps_with_tracing":
            first_fit_seconds, "warmup_step_seconds": warmup_seconds,
        "steps_timed": len(step), "repeats": repeats,
        "step_seconds_median": float(np.median(step)), "step_seconds_best": float(step.min()),
        "step_seconds_all": [float(s) for s in step],
        "tokens_per_second_median": float(tokens / np.median(step)),
        "tokens_per_second_best": float(tokens / step.min()),
        "gemm_probe_fp32_flops_median": float(np.median(samples["gemm"])),
        # CPU seconds of the process per step (all threads; busy-waiting threads count too):
        # less sensitive to other processes on the machine than wall time.
        "cpu_seconds_per_step_median": float(np.median(samples["cpu"])),
        "tokens_per_cpu_second_median": float(tokens / np.median(samples["cpu"])),
        "cores_busy_median": float(np.median(np.array(samples["cpu"]) / step)),
        # Kernel time and minor page faults per step: fresh memory the kernel must zero (the
        # dense [V, P] temporaries of the update are allocated anew every step).
        "system_cpu_seconds_per_step_median": float(np.median(samples["system"])),
        "minor_page_faults_per_step_median": float(np.median(samples["faults"])),
        "final_step_logs": logs,
        # log(perplexity) is the mean NLL over both directions' tokens: with one replica it
        # equals the loss Keras reports; see the notes for what differs with replicas.
        "reported_loss_over_log_perplexity": (
            float(logs["loss"] / np.log(logs["perplexity"])) if "perplexity" in logs else None),
    }
    if functions:
        medians = np.array(samples["step_median"])
        parts = {}
        for key in functions:
            seconds = np.array(samples[key])
            parts[key] = {"seconds_median": float(np.median(seconds)),
                          "fraction_of_step": float(np.median(seconds / medians)),
                          "seconds_per_repeat": [float(v) for v in seconds]}
        parts["encoder_plus_lstms_plus_softmax"] = {
            "seconds_median": float(sum(parts[k]["seconds_median"]
                                        for k in ("encoder", "lstms", "softmax"))),
            "fraction_of_step": float(sum(parts[k]["fraction_of_step"]
                                          for k in ("encoder", "lstms", "softmax")))}
        parts["forward_backward_plus_update"] = {
            "seconds_median": float(parts["forward_backward"]["seconds_median"]
                                    + parts["update"]["seconds_median"]),
            "fraction_of_step": float(parts["forward_backward"]["fraction_of_step"]
                                      + parts["update"]["fraction_of_step"])}
        # What the fit step spends beyond the separately timed forward+backward: the update
        # as fit runs it (fused into the step's graph), metrics, the state carry, overheads.
        parts["step_minus_forward_backward"] = {
            "seconds_median": float(np.median(medians - np.array(samples["forward_backward"]))),
            "fraction_of_step": float(np.median(1 - np.array(samples["forward_backward"])
                                                / medians))}
        parts["update_keras_adagrad_over_sparse_adagrad"] = float(np.median(
            np.array(samples["update_keras_adagrad_baseline"]) / np.array(samples["update"])))
        result["breakdown"] = parts
        result["breakdown_trace_seconds"] = parts_trace_seconds
        result["sparse_gradient"] = sparsity
        result["sparse_gradient"]["warnings_while_tracing_fit"] = fit_densify_warnings
    if bf16 is not None:
        bf16_step = np.array(samples["bf16_step"])
        result["mixed_bfloat16"] = {
            "step_seconds_median": float(np.median(bf16_step)),
            "step_seconds_best": float(bf16_step.min()),
            "tokens_per_second_median": float(tokens / np.median(bf16_step)),
            # The median over pairs of adjacent steps (float32 then bfloat16) of their ratio.
            "speedup_over_float32": float(np.median(samples["bf16_ratio"])),
            "speedup_over_float32_per_step_pair": samples["bf16_ratio"],
            # The same with process CPU seconds instead of wall seconds.
            "cpu_time_speedup_over_float32": float(np.median(samples["bf16_cpu_ratio"])),
            "cpu_time_speedup_over_float32_per_step_pair": samples["bf16_cpu_ratio"],
            "final_step_logs": bf16_logs}
    result["peak_rss_bytes"] = peak_rss()
    result["peak_rss_bytes_by_stage"] = rss
    with open("/proc/loadavg") as f:
        result["loadavg_at_end"] = f.read().split()[:3]
    return result


# --- the parent --------------------------------------------------------------------------
def available_memory():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def child_peak_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(f.read().split("VmHWM:")[1].split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        return None


def run_child(name, replicas, repeats, quick, attempts=2):
    """Runs one configuration in a fresh process (again, up to `attempts` times, when it was
    stopped because the shared machine ran short of memory)."""
    failures = []
    for attempt in range(attempts):
        result = run_child_once(name, replicas, repeats, quick)
        if result["status"] == "ok" or attempt == attempts - 1 \
                or not result["error"].startswith("stopped: the machine"):
            break
        failures.append(result)
    if failures:
        result["earlier_attempts"] = failures
    return result


def run_child_once(name, replicas, repeats, quick):
    """Runs one configuration in a fresh process, watching the machine's free memory."""
    command = [sys.executable, os.path.abspath(__file__), "--config", name, "--replicas",
               str(replicas), "--repeats", str(repeats), "--json-line"] + (
        ["--quick"] if quick else [])
    print(f"running {name} with {replicas} replica(s) ...", flush=True)
    started = time.perf_counter()
    failure, lowest, child_peak = None, available_memory(), None
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        while child.poll() is None:
            time.sleep(0.5)
            available = available_memory()
            lowest = min(lowest, available) if available is not None else lowest
            child_peak = child_peak_rss(child.pid) or child_peak
            if available is not None and available < MEMORY_FLOOR_BYTES:
                failure = (f"stopped: the machine's available memory fell below "
                           f"{MEMORY_FLOOR_BYTES / 2**30:.1f} GiB")
            elif time.perf_counter() - started > CHILD_TIMEOUT_S:
                failure = f"stopped: ran past {CHILD_TIMEOUT_S} s"
            if failure:
                child.kill()
                child.wait()
                break
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    wall = time.perf_counter() - started
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if failure or child.returncode != 0 or not lines:
        print(f"  FAILED after {wall:.0f} s: {failure or stderr[-500:]}", flush=True)
        return {"config": name, "replicas": replicas, "status": "failed",
                "error": failure or f"exit status {child.returncode}",
                "process_wall_seconds": wall, "lowest_available_memory_bytes": lowest,
                "peak_rss_bytes_seen": child_peak, "stderr_tail": stderr[-3000:]}
    result = json.loads(lines[-1][len(RESULT_PREFIX):])
    result["status"] = "ok"
    result["process_wall_seconds"] = wall
    result["lowest_available_memory_bytes"] = lowest
    print(f"  {result['tokens_per_second_median']:.0f} tokens/s (median step "
          f"{result['step_seconds_median']:.3f} s), {wall:.0f} s", flush=True)
    return result


def gpu_section():
    return {"status": "not measured here", "reason": "GPU figures are bench/gpu.py's "
            "(bench/results/gpu.json), measured where a GPU is visible, never estimated"}


def summarise(runs):
    ok = {(r["config"], r["replicas"]): r for r in runs if r["status"] == "ok"}
    summary = {"tokens_per_second": {}, "two_over_one_replica": {}, "breakdown_fractions": {},
               "failed": {f"{r['config']} x{r['replicas']}": r["error"]
                          for r in runs if r["status"] != "ok"}}
    for (name, replicas), r in sorted(ok.items()):
        summary["tokens_per_second"].setdefault(name, {})[f"{replicas}_replica"] = {
            "median": r["tokens_per_second_median"], "best": r["tokens_per_second_best"],
            "batch": f"{r['global_batch_rows']}x{r['window']}",
            "peak_rss_gib": round(r["peak_rss_bytes"] / 2**30, 2)}
        if "breakdown" in r:
            summary["breakdown_fractions"][name] = {
                k: v["fraction_of_step"] for k, v in r["breakdown"].items()
                if isinstance(v, dict)}
    for name in CONFIGS:
        if (name, 1) in ok and (name, 2) in ok:
            one, two = ok[(name, 1)], ok[(name, 2)]
            summary["two_over_one_replica"][name] = {
                "tokens_per_second_ratio_median": two["tokens_per_second_median"]
                / one["tokens_per_second_median"],
                "tokens_per_second_ratio_best": two["tokens_per_second_best"]
                / one["tokens_per_second_best"],
                # Tokens per CPU-second of the process: less sensitive to other processes.
                "tokens_per_cpu_second_ratio": two["tokens_per_cpu_second_median"]
                / one["tokens_per_cpu_second_median"],
                # The wall-time ratio with each run divided by its own GEMM probe.
                "ratio_normalised_by_gemm_probe": (
                    two["tokens_per_second_median"] / two["gemm_probe_fp32_flops_median"])
                / (one["tokens_per_second_median"] / one["gemm_probe_fp32_flops_median"]),
                "reported_loss_over_log_perplexity_2_replicas":
                    two["reported_loss_over_log_perplexity"]}
    small = ok.get(("elmo_small", 1), {})
    if "mixed_bfloat16" in small:
        summary["elmo_small_mixed_bfloat16_over_float32"] = \
            small["mixed_bfloat16"]["speedup_over_float32"]
        summary["elmo_small_mixed_bfloat16_over_float32_cpu_time"] = \
            small["mixed_bfloat16"]["cpu_time_speedup_over_float32"]
    for name in ("elmo_original", "elmo_small"):
        if (name, 1) in ok and "sparse_gradient" in ok[(name, 1)]:
            r = ok[(name, 1)]
            summary[f"{name}_sparse_gradient"] = {
                "from_tape": r["sparse_gradient"]["softmax_kernel_gradient_from_tape"],
                "after_keras_global_clipnorm": r["sparse_gradient"]["after_keras_global_clipnorm"],
                "update_seconds_sparse_adagrad": r["breakdown"]["update"]["seconds_median"],
                "update_seconds_keras_adagrad":
                    r["breakdown"]["update_keras_adagrad_baseline"]["seconds_median"],
                "keras_over_sparse_adagrad":
                    r["breakdown"]["update_keras_adagrad_over_sparse_adagrad"],
                "update_fraction_of_step": r["breakdown"]["update"]["fraction_of_step"]}
    return summary


def scaling_note(summary):
    ratios = [r["reported_loss_over_log_perplexity_2_replicas"]
              for r in summary["two_over_one_replica"].values()]
    if ratios and all(abs(r - 1) < 0.05 for r in ratios):
        return ("With 2 replicas the loss Keras reports equals log(perplexity) "
                "(reported_loss_over_log_perplexity_2_replicas ~ 1): each replica's loss is "
                "its NLL sum over the global batch's token count, as Keras 3 expects "
                "(gradients are summed over replicas).")
    return ("With 2 replicas the loss Keras reports is not log(perplexity) (see "
            "reported_loss_over_log_perplexity_2_replicas; 2 means each replica's loss is "
            "its own mean, so the summed gradients, and the updates, are num_replicas times "
            "the single-replica ones).")


def notes(summary):
    return [
        ("Tokens/s count each stream position once (rows x window), though each is predicted in "
         "both directions; the big shapes use a smaller batch than the recipes' 384 rows (see "
         "global_batch_rows), so their per-token costs are those of a small batch."),
        ("This machine has 2 cores shared with other processes: absolute figures are noisy "
         "(see step_seconds_all); the GEMM probe (gemm_probe_fp32_flops_median) says how much "
         "of the machine each process got when it was probed."),
        ("2 replicas are 2 logical CPU devices on the same 2 cores (MirroredStrategy): they "
         "share the cores, so no speed-up is possible; the ratio measures the cost of the "
         "per-replica split, the cross-replica gradient all-reduce and the mirrored update "
         "(and noise)."),
        ("Breakdown parts are separate tf.functions on the same batch, each the best of "
         "parts_best_of runs per repeat; they need not add up to the fit step (fit runs "
         "gradient and update in one graph, plus metrics and the state carry; separate "
         "functions schedule and allocate differently). With the released vocabulary the "
         "update allocates several fresh [V, P] float32 temporaries per call, which the "
         "kernel must zero (system_cpu_seconds_per_step_median, "
         "minor_page_faults_per_step_median), so the standalone update's time depends on what "
         "ran before it (seconds_per_repeat); step_minus_forward_backward is the update as "
         "fit runs it, by difference."),
        ("Sparse gradient: the sampled softmax's gradient of softmax_kernel leaves the tape as "
         "tf.IndexedSlices (softmax_kernel_gradient_unique_rows distinct rows of 793,471). "
         "fit uses elmo_tf.optimizers.SparseAdagrad (update): it sums duplicate rows, clips by "
         "the global norm of the replicas' summed gradient and updates only those rows "
         "(ResourceScatterAdd/ResourceScatterSub), as bilm-tf's TF1 Adagrad did. The "
         "baseline, keras.optimizers.Adagrad with global_clipnorm "
         "(update_keras_adagrad_baseline), densifies it in the clip (ops.square, v * scale: "
         "UnsortedSegmentSum and the 'Converting sparse IndexedSlices to a dense Tensor' "
         "warning) and computes sqrt(accumulator + epsilon) over the whole [V, P] accumulator "
         "(793471 x 512 float32 = 1.6 GB) every step; it also clips each replica's part "
         "before the cross-replica sum. update_keras_adagrad_over_sparse_adagrad is the ratio "
         "of the two in the same repeats."),
        scaling_note(summary),
        ("This benchmark splits the CPU into logical devices itself before calling "
         "make_strategy (it must happen before TensorFlow starts its devices)."),
        "GPU figures: bench/gpu.py (bench/results/gpu.json).",
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="only `tiny` (1 and 2 replicas), fewer repeats: a smoke test")
    parser.add_argument("--repeats", type=int, default=None,
                        help="interleaved repeats per configuration (default: CONFIGS's; 2 with"
                        " --quick)")
    parser.add_argument("--configs", nargs="+", default=None, choices=list(CONFIGS))
    parser.add_argument("--output", default=None, help="default bench/results/training-cpu.json"
                        " (training-cpu-quick.json with --quick)")
    parser.add_argument("--config", choices=list(CONFIGS), help="run one configuration only")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--json-line", action="store_true",
                        help="with --config: print the result as one JSON line")
    args = parser.parse_args()
    if args.config:
        repeats = args.repeats or (2 if args.quick else CONFIGS[args.config]["repeats"])
        result = run_config(args.config, args.replicas, repeats, args.quick)
        if args.json_line:
            print(RESULT_PREFIX + json.dumps(result), flush=True)
        else:
            print(json.dumps(result, indent=2))
        return

    names = args.configs or (["tiny"] if args.quick else list(CONFIGS))
    started = time.perf_counter()
    repeats = {name: args.repeats or (2 if args.quick else CONFIGS[name]["repeats"])
               for name in names}
    runs = [run_child(name, replicas, repeats[name], args.quick)
            for name in names for replicas in (1, 2)]
    summary = summarise(runs)
    report = {
        "benchmark": "training", "what": "biLM pre-training step (ElmoLanguageModel.fit), "
        "random weights, synthetic stream batches",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python"] + sys.argv),
        "machine": machine(), "versions": versions(),
        "repeats": repeats, "wall_seconds": time.perf_counter() - started,
        "summary": summary, "runs": runs, "gpu": gpu_section(), "notes": notes(summary),
    }
    output = args.output or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results",
        "training-cpu-quick.json" if args.quick else "training-cpu.json")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w") as f:
        json.dump(report, f, indent=2)
    print_report(report)
    print(f"\nwrote {output}")


def print_report(report):
    summary = report["summary"]
    print(f"\nmachine: {report['machine']['cpu']}, {report['machine']['cores']} cores, "
          f"{report['machine']['memory_gib']} GiB")
    print(f"{'config':14s} {'replicas':>8s} {'batch':>6s} {'tok/s med':>10s} {'tok/s best':>10s}"
          f" {'step s':>8s} {'RSS GiB':>8s}")
    for run in report["runs"]:
        if run["status"] != "ok":
            print(f"{run['config']:14s} {run['replicas']:8d} FAILED: {run['error']} (peak RSS "
                  f"seen {(run.get('peak_rss_bytes_seen') or 0) / 2**30:.1f} GiB)")
            continue
        print(f"{run['config']:14s} {run['replicas']:8d} "
              f"{run['global_batch_rows']:>3d}x{run['window']:<2d} "
              f"{run['tokens_per_second_median']:10.0f} {run['tokens_per_second_best']:10.0f} "
              f"{run['step_seconds_median']:8.3f} {run['peak_rss_bytes'] / 2**30:8.1f}")
    for name, ratio in summary["two_over_one_replica"].items():
        print(f"{name}: 2 replicas / 1 replica = {ratio['tokens_per_second_ratio_median']:.2f}x "
              f"(tokens per CPU-second {ratio['tokens_per_cpu_second_ratio']:.2f}x, "
              f"GEMM-normalised {ratio['ratio_normalised_by_gemm_probe']:.2f}x)")
    for name, fractions in summary["breakdown_fractions"].items():
        print(f"{name} breakdown (fraction of the fit step): " + ", ".join(
            f"{k} {v:.2f}" for k, v in fractions.items()))
    if "elmo_small_mixed_bfloat16_over_float32" in summary:
        print(f"elmo_small mixed_bfloat16 / float32 throughput: "
              f"{summary['elmo_small_mixed_bfloat16_over_float32']:.2f}x (CPU time: "
              f"{summary['elmo_small_mixed_bfloat16_over_float32_cpu_time']:.2f}x)")
    for key, value in summary.items():
        if key.endswith("_sparse_gradient"):
            print(f"{key}: {value}")
    print(f"GPU: {report['gpu']}")


if __name__ == "__main__":
    main()
