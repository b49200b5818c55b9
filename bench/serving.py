"""Serving benchmark: the exported SavedModel called in-process next to the in-memory Keras model.

    python bench/serving.py [--preset original] [--rounds 20] [--output bench/results/serving-cpu.json]

The `original` shape (random weights) is exported with `elmo_tf.export.export_saved_model`,
loaded back with `tf.saved_model.load`, and called in the same process, interleaved call by call
with the in-memory `ElmoEmbedding` (compiled with `tf.function`, the same `[batch, time]` string
input), for batches of 1 and 64 sentences of 20 tokens: sentences/s and p50/p99 latency of
each, and the exported/in-memory throughput ratio (target >= 0.9). Both the `tokens` signature
(every output) and the reusable `__call__` (the `elmo` output, the same work as the Keras
layer) are timed.
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.inference import machine, sentences, versions  # noqa: E402
from elmo_tf import ElmoBackbone, ElmoConfig, ElmoEmbedding  # noqa: E402
from elmo_tf.export import export_saved_model  # noqa: E402

BATCHES = (1, 64)
TOKENS_PER_SENTENCE = 20
TARGET_RATIO = 0.9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="elmo_original",
                        help="an ElmoConfig preset (default elmo_original)")
    parser.add_argument("--rounds", type=int, default=20,
                        help="calls per variant at batch 64 (4x as many at batch 1)")
    parser.add_argument("--output", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "serving-cpu.json"))
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    elmo = ElmoEmbedding(ElmoBackbone(ElmoConfig.from_preset(args.preset)), dropout=0.0)
    spec = tf.TensorSpec([None, None], tf.string)
    in_memory = tf.function(lambda t: elmo(t, training=False), input_signature=[spec])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = export_saved_model(elmo, os.path.join(tmp, "elmo"))
        export_seconds = time.perf_counter() - start
        loaded = tf.saved_model.load(path)
        signature = loaded.signatures["tokens"]
        results = {}
        for batch in BATCHES:
            tokens = tf.constant(sentences(batch, TOKENS_PER_SENTENCE, seed=batch))
            lengths = tf.fill([batch], TOKENS_PER_SENTENCE)
            variants = {
                "in_memory_keras": lambda: in_memory(tokens).numpy(),
                "exported_call": lambda: loaded(tokens, training=False).numpy(),
                "exported_tokens_signature":
                    lambda: signature(tokens=tokens, sequence_len=lengths)["elmo"].numpy(),
            }
            np.testing.assert_allclose(variants["exported_call"](), variants["in_memory_keras"](),
                                       atol=1e-5)
            latencies = {name: [] for name in variants}
            for fn in variants.values():
                fn()  # warm up
            rounds = args.rounds * (4 if batch == 1 else 1)
            for _ in range(rounds):
                for name, fn in variants.items():
                    start = time.perf_counter()
                    fn()
                    latencies[name].append(time.perf_counter() - start)
            entry = {}
            for name, values in latencies.items():
                values = np.array(values)
                entry[name] = {"sentences_per_second": float(batch / np.median(values)),
                               "p50_ms": float(np.percentile(values, 50) * 1e3),
                               "p99_ms": float(np.percentile(values, 99) * 1e3),
                               "max_ms": float(values.max() * 1e3),  # p99 of few calls ~ max
                               "calls": len(values)}
            keras_rate = entry["in_memory_keras"]["sentences_per_second"]
            for name in ("exported_call", "exported_tokens_signature"):
                entry[name]["ratio_to_in_memory"] = (entry[name]["sentences_per_second"]
                                                     / keras_rate)
            results[f"batch_{batch}"] = entry
    report = {
        "benchmark": "serving", "model": f"{args.preset} (random weights, seed 0)",
        "sentence_tokens": TOKENS_PER_SENTENCE,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python"] + sys.argv), "machine": machine(),
        "versions": versions(), "export_seconds": export_seconds, "results": results,
        "target": {"exported_over_in_memory_throughput": TARGET_RATIO,
                   "met": all(e[n]["ratio_to_in_memory"] >= TARGET_RATIO
                              for e in results.values()
                              for n in ("exported_call", "exported_tokens_signature"))},
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    print(f"{args.preset}: exported in {export_seconds:.1f} s")
    for batch_key, entry in results.items():
        for name, e in entry.items():
            ratio = f"  x{e['ratio_to_in_memory']:.2f}" if "ratio_to_in_memory" in e else ""
            print(f"{batch_key:9s} {name:27s} {e['sentences_per_second']:8.1f} sent/s  "
                  f"p50 {e['p50_ms']:8.1f} ms  p99 {e['p99_ms']:8.1f} ms{ratio}")
    print(f"target ratio >= {TARGET_RATIO}: {'met' if report['target']['met'] else 'NOT met'}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
