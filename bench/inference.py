"""Inference benchmark of the `original` ELMo shape (random weights) against this machine's limits.

    python bench/inference.py [--repeats 7] [--output bench/results/inference-cpu.json]

Everything is measured in one run, interleaved: for every repeat, the machine's fp32 and bf16
GEMM rates (a 4096^3 matmul), its memory read bandwidth (a reduction over 1 GiB), a naive
baseline (`keras.layers.RNN` with a straightforward projected-LSTM cell, per-step input matmul)
and elmo-tf's `ElmoBackbone.embed` run back to back, each timed as the best of three runs, so
every figure is also a ratio to a neighbour measured under the same load (this machine is
shared and noisy); reported figures are medians over the repeats of those per-repeat values.
FLOP rates are given twice: per real token (the conservative figure) and per position computed
(`<S>` and `</S>` included: what the hardware actually did). Batches are
1x20, 32x20 and 64x40 tokens; tokens/s count real tokens, not `<S>`/`</S>`. Peak RSS is measured
in a fresh process running 32x20. GPU figures are `bench/gpu.py`'s.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import elmo_tf  # noqa: E402
from elmo_tf import ElmoBackbone, ElmoConfig, tokens_to_char_ids  # noqa: E402

SHAPES = ((1, 20), (32, 20), (64, 40))
BEST_OF = 3
# The targets. The GEMM fraction is judged both ways: FLOPs of the positions computed
# ("205 MFLOP per position") and, more strictly, of the real tokens only.
TARGETS = {
    "fp32_32x20_fraction_of_gemm_per_position": 0.60,
    "fp32_32x20_fraction_of_gemm_per_real_token": 0.60,
    "fp32_1x20_over_weight_streaming_bound": 1.5,
    "bf16_over_fp32_32x20": 2.5,
    "peak_rss_32x20_bytes": 1 << 30,
}
HIGHER_IS_BETTER = ("fp32_32x20_fraction_of_gemm_per_position",
                    "fp32_32x20_fraction_of_gemm_per_real_token", "bf16_over_fp32_32x20")


def flops_per_position(config):
    """Multiply-adds x 2 of one position's forward pass (char CNN, highways, projection, LSTMs)."""
    e, n, p, c = config.char_embedding_dim, config.num_filters, config.projection_dim, config.lstm_dim
    chars = config.max_characters_per_token
    cnn = sum(2 * w * e * f * (chars - w + 1) for w, f in config.filters)
    highway = config.n_highway * 2 * 2 * n * n
    projection = 2 * n * p if n != p else 0
    lstm = 2 * config.n_layers * 2 * ((2 * p) * 4 * c + c * p)
    return cnn + highway + projection + lstm


def recurrent_weight_bytes(config, bytes_per_value=4):
    """Bytes of the recurrent and projection matrices of every layer and direction."""
    p, c = config.projection_dim, config.lstm_dim
    return 2 * config.n_layers * (p * 4 * c + c * p) * bytes_per_value


def sentences(batch, time_steps, seed):
    rng = np.random.default_rng(seed)
    words = [f"w{rng.integers(0, 10**6)}" for _ in range(batch * time_steps)]
    return [words[i * time_steps:(i + 1) * time_steps] for i in range(batch)]


class NaiveProjectedLSTMCell(keras.layers.Layer):
    """A straightforward Keras cell: `[x, h] @ W_0` every step, ELMo's gates and clips."""

    def __init__(self, lstm, **kwargs):
        super().__init__(**kwargs)
        self.lstm = lstm  # an elmo_tf ProjectedLSTM whose weights this cell uses
        self.state_size = [lstm.projection_dim, lstm.units]
        self.output_size = lstm.projection_dim

    def call(self, x, states):
        h, c = states
        kernel = tf.concat([self.lstm.input_kernel, self.lstm.recurrent_kernel], axis=0)
        z = tf.matmul(tf.concat([x, h], axis=1), kernel) + self.lstm.bias
        i, j, f, o = tf.split(z, 4, axis=1)
        c = tf.clip_by_value(tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j),
                             -self.lstm.cell_clip, self.lstm.cell_clip)
        h = tf.clip_by_value(tf.matmul(tf.sigmoid(o) * tf.tanh(c), self.lstm.projection_kernel),
                             -self.lstm.proj_clip, self.lstm.proj_clip)
        return h, [h, c]


def naive_forward(backbone):
    """The same biLM with `keras.layers.RNN` layers (sentences of equal length, no padding)."""
    rnns = [[keras.layers.RNN(NaiveProjectedLSTMCell(lstm), return_sequences=True,
                              go_backwards=d == 1) for lstm in stack]
            for d, stack in enumerate(backbone.bilm.stacks)]
    add_boundaries = backbone.get_layer("add_sentence_boundaries")

    @tf.function(input_signature=[tf.TensorSpec([None, None, 50], tf.int32)])
    def forward(char_ids):
        ids, _ = add_boundaries(char_ids)
        x = backbone.token_encoder(ids)
        layers = [tf.concat([x, x], -1)]
        inputs = [x, x]
        for k in range(backbone.config.n_layers):
            outputs = [rnns[0][k](inputs[0]), tf.reverse(rnns[1][k](inputs[1]), [1])]
            if k > 0:
                outputs = [o + i for o, i in zip(outputs, inputs)]
            layers.append(tf.concat(outputs, -1))
            inputs = outputs
        return tf.stack(layers, axis=1)[:, :, 1:-1]

    return forward


def gemm_rate(dtype, n=4096):
    """FLOP/s of an n^3 matmul (summed to a scalar inside the graph: no result copy)."""
    a = tf.cast(tf.random.normal([n, n]), dtype)
    b = tf.cast(tf.random.normal([n, n]), dtype)
    f = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))
    f()
    return lambda: 2 * n ** 3 / best_seconds(lambda: f().numpy())


def read_bandwidth(n_bytes=1 << 30):
    """Bytes/s of a reduction over n_bytes of float32."""
    x = tf.random.uniform([n_bytes // 4])
    f = tf.function(lambda: tf.reduce_sum(x))
    f()
    return lambda: n_bytes / best_seconds(lambda: f().numpy())


def best_seconds(fn, runs=BEST_OF):
    """The best of `runs` back-to-back runs: every probe and every model run is timed alike."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def peak_rss_subprocess(backbone, batch, time_steps):
    """Peak RSS (VmHWM) of a fresh process that loads `backbone` from released-layout files, as
    a user would, and embeds batch x time tokens three times; also its RSS once loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        options, weights = os.path.join(tmp, "options.json"), os.path.join(tmp, "weights.hdf5")
        backbone.save_allennlp(weights, options)
        code = (
            "import os, sys; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
            "sys.path.insert(0, %r)\n"
            "import elmo_tf\n"
            "from bench.inference import sentences\n"
            "def status(key):\n"
            "    text = open('/proc/self/status').read()\n"
            "    return int(text.split(key + ':')[1].split()[0]) * 1024\n"
            "b = elmo_tf.ElmoBackbone.from_allennlp(%r, %r)\n"
            "loaded = status('VmRSS')\n"
            "ids = elmo_tf.tokens_to_char_ids(sentences(%d, %d, 0))\n"
            "for _ in range(3): b.embed(ids)['layers'].numpy()\n"
            "print(loaded, status('VmHWM'))\n"
        ) % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), options, weights,
             batch, time_steps)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
    loaded, peak = (int(v) for v in out.stdout.split()[-2:])
    return loaded, peak


def tensorflow_baseline_rss():
    """RSS of a fresh process that has only imported TensorFlow and Keras (the runtime's share)."""
    code = ("import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\nimport keras, tensorflow\n"
            "print(int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) * 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        cpu = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("model name"))
        flags = next(l.split(":", 1)[1].split() for l in lines if l.startswith("flags"))
        isa = sorted(f for f in flags if f.startswith(("avx512", "amx")))
    except (OSError, StopIteration):
        isa = []
    return {"cpu": cpu, "cores": os.cpu_count(), "isa": isa,
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "gpus": [d.name for d in tf.config.list_logical_devices("GPU")]}


def versions():
    """The versions that ran, the commit, and whether the tracked files (bench/results/ left
    out: a benchmark writes there as it goes) differed from it (`dirty`: the figures then come
    from uncommitted code)."""
    def git(*args):
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True,
                                  cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        except OSError:
            return ""

    commit = git("rev-parse", "HEAD")
    return {"python": platform.python_version(), "tensorflow": tf.__version__,
            "keras": keras.__version__, "numpy": np.__version__, "elmo_tf": elmo_tf.__version__,
            "git_commit": commit,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "..",
                              ":!results")) if commit else None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "inference-cpu.json"))
    args = parser.parse_args()

    config = ElmoConfig.from_preset("original")
    keras.utils.set_random_seed(0)
    fp32 = ElmoBackbone(config)
    bf16 = ElmoBackbone(config, dtype="mixed_bfloat16")
    bf16.set_weights(fp32.get_weights())
    naive = naive_forward(fp32)
    inputs = {shape: tokens_to_char_ids(sentences(*shape, seed=i))
              for i, shape in enumerate(SHAPES)}

    # Correctness of what is timed: the baseline and bf16 against elmo-tf fp32.
    check = inputs[(32, 20)]
    reference = fp32.embed(check)["layers"].numpy()
    naive_error = float(np.abs(naive(check).numpy() - reference).max())
    bf16_out = bf16.embed(check)["layers"].numpy()
    bf16_error = float(np.abs(bf16_out - reference).max())
    bf16_relative = float(np.abs(bf16_out - reference).max() / np.abs(reference).max())

    probes = {"gemm_fp32": gemm_rate(tf.float32), "gemm_bf16": gemm_rate(tf.bfloat16),
              "read_bandwidth": read_bandwidth()}
    runs = {}
    for shape, ids in inputs.items():
        for name, fn in (("elmo_tf_fp32", lambda ids=ids: fp32.embed(ids)["layers"].numpy()),
                         ("elmo_tf_bf16", lambda ids=ids: bf16.embed(ids)["layers"].numpy()),
                         ("naive_keras_rnn_fp32", lambda ids=ids: naive(ids).numpy())):
            fn()  # trace and warm up
            runs[(name, shape)] = fn
    samples = {k: [] for k in list(probes) + list(runs)}
    for repeat in range(args.repeats):
        for key, probe in probes.items():
            samples[key].append(probe())
        for key, fn in runs.items():
            samples[key].append(best_seconds(fn))
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)

    flops = flops_per_position(config)
    results = {"hardware": {k: {"median": float(np.median(samples[k])), "max": float(max(samples[k])),
                                "unit": "byte/s" if k == "read_bandwidth" else "FLOP/s"}
                            for k in probes},
               "shapes": {}}
    for (name, (batch, steps)), _ in runs.items():
        seconds = np.array(samples[(name, (batch, steps))])
        tokens, positions = batch * steps, batch * (steps + 2)
        gemm = np.array(samples["gemm_bf16" if "bf16" in name else "gemm_fp32"])
        bandwidth = np.array(samples["read_bandwidth"])
        bytes_per_value = 2 if "bf16" in name else 4
        bound = (steps + 2) * recurrent_weight_bytes(config, bytes_per_value) / bandwidth
        entry = {
            "batch_x_tokens": f"{batch}x{steps}",
            "seconds_median": float(np.median(seconds)), "seconds_min": float(seconds.min()),
            "tokens_per_second_median": float(tokens / np.median(seconds)),
            "gflops_per_second_real_tokens": float(tokens * flops / np.median(seconds) / 1e9),
            "gflops_per_second_all_positions": float(positions * flops / np.median(seconds) / 1e9),
            # Per repeat, against the probes measured right before it; then the median.
            "fraction_of_gemm_real_tokens": float(np.median(tokens * flops / seconds / gemm)),
            "fraction_of_gemm_all_positions": float(np.median(positions * flops / seconds / gemm)),
            "over_weight_streaming_bound": float(np.median(seconds / bound)),
        }
        results["shapes"].setdefault(name, {})[f"{batch}x{steps}"] = entry
    for (batch, steps) in SHAPES:
        key = f"{batch}x{steps}"
        ours = np.array(samples[("elmo_tf_fp32", (batch, steps))])
        results["shapes"]["elmo_tf_fp32"][key]["speedup_over_naive"] = float(
            np.median(np.array(samples[("naive_keras_rnn_fp32", (batch, steps))]) / ours))
        results["shapes"]["elmo_tf_bf16"][key]["speedup_over_fp32"] = float(
            np.median(ours / np.array(samples[("elmo_tf_bf16", (batch, steps))])))

    loaded_rss, peak_rss = peak_rss_subprocess(fp32, 32, 20)
    runtime_rss = tensorflow_baseline_rss()
    fp32_32 = results["shapes"]["elmo_tf_fp32"]["32x20"]
    gemm_ratio = float(np.median(np.array(samples["gemm_bf16"]) / np.array(samples["gemm_fp32"])))
    summary = {
        "fp32_32x20_fraction_of_gemm_per_position": fp32_32["fraction_of_gemm_all_positions"],
        "fp32_32x20_fraction_of_gemm_per_real_token": fp32_32["fraction_of_gemm_real_tokens"],
        "fp32_1x20_over_weight_streaming_bound":
            results["shapes"]["elmo_tf_fp32"]["1x20"]["over_weight_streaming_bound"],
        "bf16_over_fp32_32x20": results["shapes"]["elmo_tf_bf16"]["32x20"]["speedup_over_fp32"],
        "peak_rss_32x20_bytes": peak_rss,
    }
    report = {
        "benchmark": "inference", "model": "original (random weights, seed 0)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python"] + sys.argv),
        "machine": machine(), "versions": versions(),
        "flops_per_position": flops,
        "recurrent_weight_bytes_fp32": recurrent_weight_bytes(config),
        "repeats": args.repeats,
        "checks": {"naive_vs_elmo_tf_max_abs_diff": naive_error,
                   "bf16_vs_fp32_max_abs_diff_32x20": bf16_error,
                   "bf16_vs_fp32_max_diff_relative_to_max_abs_value": bf16_relative,
                   "bf16_over_fp32_gemm_rate_this_machine": gemm_ratio},
        "memory": {"how": "VmHWM of a fresh process: from_allennlp on the released-layout files, "
                          "then embed 32x20 three times",
                   "peak_rss_32x20_bytes": peak_rss, "rss_after_loading_bytes": loaded_rss,
                   "rss_of_tensorflow_and_keras_import_alone_bytes": runtime_rss,
                   "fp32_weight_bytes": 4 * fp32.count_params()},
        "results": results,
        "targets": {k: {"target": v, "measured": summary[k],
                        "met": summary[k] >= v if k in HIGHER_IS_BETTER else summary[k] <= v}
                    for k, v in TARGETS.items()},
        "gpu": {"status": "not measured here", "reason": "GPU figures are bench/gpu.py's "
                "(bench/results/gpu.json), measured where a GPU is visible, never estimated"},
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    _print(report)
    print(f"\nwrote {args.output}")


def _print(report):
    hw = report["results"]["hardware"]
    print(f"\nmachine: {report['machine']['cpu']}, {report['machine']['cores']} cores")
    print(f"fp32 GEMM {hw['gemm_fp32']['median'] / 1e9:.0f} GFLOP/s, bf16 GEMM "
          f"{hw['gemm_bf16']['median'] / 1e9:.0f} GFLOP/s, read bandwidth "
          f"{hw['read_bandwidth']['median'] / 1e9:.1f} GB/s (medians)")
    print(f"{'run':22s} {'shape':>6s} {'tok/s':>8s} {'GFLOP/s':>8s} {'of GEMM':>13s} "
          f"{'/bound':>7s} {'ratio':>14s}")
    print(f"{'':22s} {'':>6s} {'':>8s} {'(tokens)':>8s} {'tokens/posns':>13s}")
    for name, shapes in report["results"]["shapes"].items():
        for key, e in shapes.items():
            ratio = (f"{e['speedup_over_naive']:.2f}x naive" if "speedup_over_naive" in e else
                     f"{e['speedup_over_fp32']:.2f}x fp32" if "speedup_over_fp32" in e else "")
            print(f"{name:22s} {key:>6s} {e['tokens_per_second_median']:8.0f} "
                  f"{e['gflops_per_second_real_tokens']:8.0f} "
                  f"{e['fraction_of_gemm_real_tokens']:6.0%}/{e['fraction_of_gemm_all_positions']:<6.0%} "
                  f"{e['over_weight_streaming_bound']:7.2f} {ratio:>14s}")
    memory = report["memory"]
    print(f"peak RSS 32x20: {memory['peak_rss_32x20_bytes'] / 2**20:.0f} MiB (TensorFlow alone "
          f"{memory['rss_of_tensorflow_and_keras_import_alone_bytes'] / 2**20:.0f} MiB, weights "
          f"{memory['fp32_weight_bytes'] / 2**20:.0f} MiB); "
          f"bf16 max |diff| vs fp32: {report['checks']['bf16_vs_fp32_max_abs_diff_32x20']:.3g}")
    for k, t in report["targets"].items():
        print(f"target {k}: {t['measured']:.3g} (target {t['target']:.3g}) "
              f"{'met' if t['met'] else 'NOT met'}")
    print(f"GPU: {report['gpu']}")


if __name__ == "__main__":
    main()
