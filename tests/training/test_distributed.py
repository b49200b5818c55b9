"""`tf.distribute` training: MirroredStrategy over 2 logical CPUs trains as one replica does for
the same global batch, and MultiWorkerMirroredStrategy runs with two local workers on loopback.

Every run is a subprocess: logical devices and the multi-worker cluster must be configured
before TensorFlow starts, which the pytest process has long done.
"""

import glob
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from elmo_tf.files import temporary_prefix
from tests import subprocesses
from tests.conftest import CPU_ONLY_ENV
from tests.training import MODEL, RECIPE, h5_values

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = 4


def _env(**extra):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **CPU_ONLY_ENV, **extra)


def _write_recipe(path, **overrides):
    path.write_text(json.dumps({**RECIPE, **overrides}))
    return path


@pytest.fixture(scope="module")
def strategy_runs(tmp_path_factory, corpus):
    """ELMo's stream and sentence batches, Masked ELMo's stream batches and a step XLA cannot
    compile, each trained with the default strategy and with 2 mirrored replicas (with XLA per
    replica or not), in one subprocess (`tests/training/strategy_runs.py`)."""
    base = tmp_path_factory.mktemp("strategies")
    # The sentence runs read the shared corpus's sentences of at most 9 words (2 shards): their
    # batches take 2 of the length buckets (`<S> .. </S>` under 8 tokens, and 8 to 11) instead
    # of 6, so the compiled run, resumed half-way, compiles at most 2 shapes per half and
    # replica, not up to 6. (Timed run by run in one instrumented copy of the fixture's process,
    # 2026-12-01: its two halves took 47 s of CPU, against 89 s of the process's 200 on every
    # length.) Rows of different lengths still share each bucket: the replicas still count
    # different numbers of tokens. (Seed 0's first 4 batches, as `language_model_dataset` deals
    # them to 2 replicas: 11, 11, 7 and 11 tokens wide.)
    short = [line for path in sorted(glob.glob(corpus["train"]))
             for line in pathlib.Path(path).read_text().splitlines() if len(line.split()) <= 9]
    (base / "short").mkdir()
    for index in range(2):
        (base / "short" / f"part-{index}").write_text("".join(
            f"{line}\n" for line in short[index::2]))
    short_glob = str(base / "short" / "part-*")
    # Stream mode with a global-norm clip below this model's gradient norms (0.2 to 0.5): the
    # sum of the replicas' gradients must be clipped, not each replica's part.
    masked_model = {**MODEL, "lstm": {**{k: v for k, v in MODEL["lstm"].items()
                                         if k not in ("cell_clip", "proj_clip")},
                                      "fully_bidirectional": True}}
    # (The replicas without XLA: Masked ELMo's stream run below, whose state, clip and
    # summed optimizer are the same code as ELMo's.)
    runs = [f"{_write_recipe(base / 'stream.json', mode='stream', clip_norm=0.1)}:"
            "default,mirrored-xla",
            # Resumed half-way: XLA per replica resumes exactly, keeping its setting. (The
            # uncompiled step with replicas of different counts: Masked ELMo's, below.)
            f"{_write_recipe(base / 'sentence.json', mode='sentence')}:"
            f"default,mirrored-xla-resumed@{short_glob}",
            f"{_write_recipe(base / 'masked_stream.json', base='tiny_masked', model=masked_model, mode='stream', clip_norm=0.1)}:"  # noqa: E501
            "default,mirrored",
            # A step with an op XLA cannot compile, which only a compiled step refuses.
            f"{_write_recipe(base / 'sampled.json', mode='stream', num_negatives=64)}:"
            "mirrored-xla-refuses"]
    command = [sys.executable, "-m", "tests.training.strategy_runs", corpus["train"], str(base),
               str(STEPS), *runs]
    done = subprocesses.run(command, check=False, cwd=ROOT, env=_env(), capture_output=True,
                            text=True, seconds=600, what="the strategy runs' subprocess")
    assert done.returncode == 0, done.stderr[-4000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULTS ")][-1]
    return base, json.loads(line[len("RESULTS "):])


def _compare(base, results, mode, *, loss_rtol, weight_rtol, weight_atol, run="mirrored"):
    default, mirrored = results[mode]["default"], results[mode][run]
    assert default["steps"] == mirrored["steps"] == STEPS
    assert default["train"].keys() == mirrored["train"].keys()
    for metric in default["train"]:
        np.testing.assert_allclose(mirrored["train"][metric], default["train"][metric],
                                   rtol=loss_rtol, err_msg=f"{mode}: {metric}")
    one, two = base / f"{mode}-default", base / f"{mode}-{run}"
    # The biLM (released layout), then the whole language model with the softmax and the
    # optimizer's state at the end and at the step-2 checkpoint (the carried LSTM state, per
    # replica, is not saved).
    for name in ("weights.hdf5", "language_model.weights.h5",
                 "checkpoints/ckpt-000000002.weights.h5"):
        values, other = h5_values(one / name), h5_values(two / name)
        assert values.keys() == other.keys(), name
        for key, value in values.items():
            np.testing.assert_allclose(other[key], value, rtol=weight_rtol, atol=weight_atol,
                                       err_msg=f"{mode}: {name}: {key}")


def test_an_embedding_exported_under_mirrored_replicas_saves_only_its_mix_trainable(
        strategy_runs):
    """`saved_as_untrainable` reaches each replica's copy of a variable: the export of an
    embedding made under the strategy trains its scalar mix only (as without one)."""
    _, results = strategy_runs
    assert results["export"]["trainable"] == ["elmo_embedding/scalar_mix_0/gamma:0",
                                              "elmo_embedding/scalar_mix_0/scalar_weights:0"]
    assert results["export"]["variables"] > 20


def test_mirrored_masked_elmo_stream_training_equals_one_replica(strategy_runs):
    """2 replicas (without XLA) train as 1 on the same global batch, up to float32 summation
    order. Masked ELMo's stream batches: each replica's rows are laid out as one replica's
    (half read left to right, half right to left) and carry their own LSTM state from step to
    step, so this also checks that the per-replica state follows the right rows; and the clip
    that the summed gradient is clipped (clipping each replica's part, as Keras's own clip
    does, instead: weights 5e-3 apart, measured 2026-11-30). The replicas select different
    numbers of tokens: the loss must be the mean over the global batch's selected tokens
    (their counts summed over the replicas), not the mean of the replicas' means (measured:
    that puts the loss 2.7e-4 apart, relative; ELMo's stream runs, whose replicas count the
    same, pass)."""
    base, results = strategy_runs
    assert set(results["masked_stream"]["default"]["train"]) == {"loss", "perplexity"}
    _compare(base, results, "masked_stream", loss_rtol=1e-5, weight_rtol=2.5e-7,
             weight_atol=1e-7)


@pytest.mark.parametrize("mode, run", [("stream", "mirrored-xla"),
                                       ("sentence", "mirrored-xla-resumed")])
def test_xla_per_replica_trains_as_one_replica(strategy_runs, mode, run):
    """XLA per replica (`CompiledStep`) under MirroredStrategy: 2 replicas, each compiling its
    own step, train as 1 replica without XLA on the same global batch: ELMo in stream batches
    (the carried LSTM state goes in and out of the compiled step, the clip after the sum),
    ELMo in sentence batches (4 sentences each, of different lengths, padded to their
    buckets: a compiled step per shape; the loss must still be the mean over the global
    batch's tokens, not the mean of the replicas' means, which measured 7e-4 on the weights
    on sentences of every length, and 3.0e-5 on the backward perplexity, relative, on the
    fixture's sentences of at most 9 words, 2026-12-01),
    killed half-way and resumed with the `xla` setting left out (it keeps "on", skips the
    batches both replicas trained on, and resumes exactly)."""
    base, results = strategy_runs
    assert results[mode][run]["xla"] == ["on", True]
    assert results[mode]["default"]["xla"] == ["off", False]
    _compare(base, results, mode, loss_rtol=1e-5, weight_rtol=2e-6, weight_atol=2e-6, run=run)


def test_xla_per_replica_really_compiles_each_replicas_step(strategy_runs):
    # An op XLA cannot compile (a Python function) in the model is refused with XLA per
    # replica, by XLA's compiler (its own message), in the replica's compiled step: no
    # silently uncompiled step.
    _, results = strategy_runs
    error = results["sampled"]["mirrored-xla-refuses"]["error"]
    assert error and "Detected unsupported operations when trying to compile graph " \
        "__inference__gradients" in error and "on XLA_CPU_JIT: EagerPyFunc" in error, error
    assert "2 root error(s)" in error, error  # one per replica


@pytest.mark.parametrize("optimizer", ["sparse_adagrad", "adam"])
def test_the_optimizers_sum_the_replicas_row_sparse_gradients_then_clip(strategy_runs,
                                                                        optimizer):
    # The training runs above use the full softmax (dense gradients); the sampled softmax's
    # row-sparse gradient goes through the recipes' optimizers here.
    _, results = strategy_runs
    assert results["optimizers"][optimizer] < 1e-6


def test_a_mirrored_stream_run_evaluates_as_the_one_replica_run(strategy_runs, corpus,
                                                                 tmp_path):
    # Saved weights leave out the per-replica LSTM state, so `evaluate` (one replica) reloads a
    # 2-replica run (the compiled one: its evaluation compiled too, as its run.json records
    # `xla` on, against the uncompiled one-replica run's); and a corpus that fills no batch is
    # a clear error.
    from elmo_tf.training import evaluate

    base, _ = strategy_runs
    one = evaluate(str(base / "stream-default"), corpus["train"])
    two = evaluate(str(base / "stream-mirrored-xla"), corpus["train"])
    assert one.keys() == two.keys()
    for key, value in one.items():
        np.testing.assert_allclose(two[key], value, rtol=1e-5, err_msg=key)
    (tmp_path / "one.txt").write_text("the cat sleeps\n")
    with pytest.raises(ValueError, match="too small to evaluate.*8 rows of 10 tokens"):
        evaluate(str(base / "stream-default"), str(tmp_path / "one.txt"))


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _excerpt(output):
    """The start of the command's error message (tensors in it can make it long) and the tail."""
    start = output.find("elmo-tf: error:")
    head = output[start:start + 600] + "\n[...]\n" if start >= 0 else ""
    return head + output[-2000:]


def _run_workers(tmp_path, recipe, corpus, *args, name):
    """`elmo-tf train` as two local workers of one cluster; returns their logs (both must exit
    0). Each worker's --output is `tmp_path/out_<index>`."""
    ports = _free_ports(2)
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    workers = []
    for index in range(2):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        command = [sys.executable, "-m", "elmo_tf.cli", "train", "--recipe", str(recipe),
                   "--corpus", corpus, "--output", str(tmp_path / f"out_{index}"),
                   "--strategy", "multi-worker", *args]
        with open(tmp_path / f"{name}_{index}.log", "w") as log:  # the child keeps its copy
            workers.append(subprocess.Popen(
                command, cwd=ROOT, env=_env(TF_CONFIG=json.dumps(tf_config)), stdout=log,
                stderr=subprocess.STDOUT))
    deadline = time.monotonic() + subprocesses.limit(240)
    first_failure = None
    try:
        while any(p.poll() is None for p in workers) and time.monotonic() < deadline:
            if first_failure is None and any(p.poll() not in (None, 0) for p in workers):
                first_failure = time.monotonic()  # the other one may wait on it for ever
            if first_failure is not None and time.monotonic() > first_failure + 20:
                break
            time.sleep(0.2)
    finally:
        for process in workers:
            if process.poll() is None:
                process.kill()
            process.wait()
    outputs = [(tmp_path / f"{name}_{i}.log").read_text(errors="replace") for i in range(2)]
    report = "\n".join(f"--- worker {i} (exit {p.returncode}):\n{_excerpt(out)}"
                       for i, (p, out) in enumerate(zip(workers, outputs)))
    assert [p.returncode for p in workers] == [0, 0], report
    return outputs, report


def _assert_same_model(tmp_path):
    for name in ("weights.hdf5", "language_model.weights.h5"):
        chief, other = h5_values(tmp_path / "out_0" / name), h5_values(tmp_path / "out_1" / name)
        assert chief.keys() == other.keys()
        for key, value in chief.items():
            assert np.isfinite(value).all(), key
            np.testing.assert_array_equal(other[key], value, err_msg=f"{name}: {key}")


def test_multi_worker_trains_and_resumes_with_two_local_workers(tmp_path, corpus):
    # With XLA per replica; a resumed run keeps the setting it was started with.
    recipe = _write_recipe(tmp_path / "R.json")
    command = (tmp_path, recipe, corpus["train"], "--steps", "4", "--checkpoint-every", "2")
    outputs, report = _run_workers(*command, "--xla", "on", name="first")
    for index in range(2):
        record = json.loads((tmp_path / f"out_{index}" / "run.json").read_text())
        assert (record["xla"], record["xla_compiled"]) == ("on", True)
    # Each worker keeps the whole run in its own --output (so it can resume without a shared
    # file system), with the same weights; only the chief writes TensorBoard logs.
    for index, output in enumerate(outputs):
        assert "trained 4 steps" in output, report
        directory = tmp_path / f"out_{index}"
        for name in ("weights.hdf5", "options.json", "vocab.txt", "run.json",
                     "language_model.weights.h5", "checkpoints/ckpt-000000004.weights.h5"):
            assert (directory / name).exists(), (name, report)
    _assert_same_model(tmp_path)
    assert (tmp_path / "out_0" / "logs").is_dir() and not (tmp_path / "out_1" / "logs").exists()

    # Worker 1 as if killed while writing its step-4 checkpoint: both must resume from step 2,
    # the newest checkpoint they both have, and end with the same model again.
    checkpoints = tmp_path / "out_1" / "checkpoints"
    (checkpoints / "ckpt-000000004.weights.h5").rename(
        checkpoints / f"{temporary_prefix('ckpt-000000004.weights.h5')}x1y2.tmp")
    outputs, report = _run_workers(*command, name="again")
    for index, output in enumerate(outputs):
        assert "at step 2 from" in output and "trained 4 steps" in output, report
        record = json.loads((tmp_path / f"out_{index}" / "run.json").read_text())
        assert (record["xla"], record["xla_compiled"]) == ("on", True), report
    assert sorted(os.listdir(checkpoints)) == ["ckpt-000000002.weights.h5",
                                               "ckpt-000000004.weights.h5"]
    _assert_same_model(tmp_path)
