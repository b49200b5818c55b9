"""Parity with bilm-tf: the largest |difference| between elmo-tf's outputs and the original
TensorFlow implementation's on the fixture's 10 stateful batches (`../shared/fixtures/bilm_tf`:
the released layout's weights, three sentences per batch, the top layer of both directions).

    python bench/parity.py [--output bench/results/parity-cpu.json]

`ElmoBackbone.__call__` (the plain graph) and `embed` (XLA where the device compiles it, shape
buckets) are each run through all 10 batches in order, the LSTM states carried between them as
bilm-tf carries them; float32. On a GPU, `bench/gpu.py` runs the same with TF32 off and on.
"""

import argparse
import datetime
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.inference import machine, versions  # noqa: E402
from elmo_tf import ElmoBackbone, tokens_to_char_ids  # noqa: E402
from elmo_tf.files import write_json_atomically  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "bilm_tf"


def parity(tf32_settings=(False,)):
    """`{"<method>_tf32_<off|on>": largest |difference|}` from bilm-tf's outputs on the
    fixture's 10 stateful batches, for `__call__` and `embed`, with TF32 off and/or on (it only
    matters on a GPU); `{"status": "missing", ...}` without the fixture."""
    if not (FIXTURE / "lm_weights.hdf5").exists():
        return {"status": "missing", "reason": f"no bilm-tf fixture at {FIXTURE}"}
    sentences_file = json.loads((FIXTURE / "lm_embeddings_sentences.json").read_text())
    import h5py

    batches = []
    for i in range(10):
        tokens = [sentences_file[k][i].split() for k in range(3)]
        expected = []
        for k in range(3):
            with h5py.File(FIXTURE / f"lm_embeddings_{k}.hdf5", "r") as f:
                top = f[str(i)][...]
            expected.append(np.concatenate([top[0], top[1]], axis=-1))
        batches.append((tokens_to_char_ids(tokens), tokens, expected))
    results = {}
    for enabled in tf32_settings:
        tf.config.experimental.enable_tensor_float_32_execution(enabled)
        for method in ("__call__", "embed"):
            backbone = ElmoBackbone.from_allennlp(FIXTURE / "options.json",
                                                  FIXTURE / "lm_weights.hdf5", stateful=True)
            run = getattr(backbone, method)
            worst = 0.0
            for ids, tokens, expected in batches:
                layers = run(ids)["layers"].numpy()
                for k in range(3):
                    worst = max(worst, float(np.abs(layers[k, 2, :len(tokens[k])]
                                                    - expected[k]).max()))
            results[f"{method.strip('_')}_tf32_{'on' if enabled else 'off'}"] = worst
    tf.config.experimental.enable_tensor_float_32_execution(True)  # TensorFlow's default
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "parity-cpu.json"))
    args = parser.parse_args()
    results = parity()
    if results.get("status") == "missing":
        sys.exit(f"bench/parity.py: {results['reason']}")
    report = {"benchmark": "parity", "what": __doc__.split("\n\n")[0].replace("\n", " "),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "command": " ".join(["python"] + sys.argv), "machine": machine(),
              "versions": versions(), "devices": [d.name for d in tf.config.list_logical_devices()],
              "results": results, "max_abs_difference": max(results.values())}
    write_json_atomically(args.output, report)
    print(json.dumps(results), f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
