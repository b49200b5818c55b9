"""Shared test helpers: the bilm-tf fixture, tiny random models in the released layout."""

import glob
import json
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# On a GPU: TensorFlow takes all of its memory by default, and every subprocess a test starts
# would then fail to start; and it runs float32 matmuls as TF32 (10-bit mantissas) on Ampere and
# newer, which parity checks at 1e-5 cannot allow. Both settings reach the subprocesses too.
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
# No persistent XLA cache (elmo_tf.xla_cache): every test compiles what it runs, and writes
# nothing under the user's home; the cache's own test gives it a directory.
os.environ.setdefault("ELMO_TF_XLA_CACHE", "off")
# On a machine without an NVIDIA GPU, XLA compiles the tests' programs without LLVM's
# optimisation passes (level 0; XLA's default is 3, and its GPU back end needs at least 2): the
# same HLO programs, which is what the tests check (that they compile, and compute what the
# uncompiled step does, at float tolerances), for less CPU: 0.84x for three of the costliest
# XLA tests' processes (`bench/results/suite_xla_o0-epyc.json`). What changes is LLVM's code
# generation: the speed of the machine code and possibly its float rounding, within those
# tolerances; level 3 itself is then not what these tests build. Subprocesses inherit it.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", "") and \
        not glob.glob("/dev/nvidia[0-9]*"):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                     "--xla_backend_optimization_level=0"]))
# Tests of training logic that compare runs across processes (resuming, replicas, workers) run
# their subprocesses on the CPU: on a GPU they would share one device (two workers' collectives
# abort there) and its non-deterministic reductions.
CPU_ONLY_ENV = {"CUDA_VISIBLE_DEVICES": ""}

import h5py  # noqa: E402
import pytest  # noqa: E402

from tests import reference  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
BILM_TF = ROOT.parent / "shared" / "fixtures" / "bilm_tf"


@pytest.fixture(scope="session", autouse=True)
def no_tf32():
    """Full float32 matmuls on GPUs for the whole session (see NVIDIA_TF32_OVERRIDE above)."""
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)


@pytest.fixture(scope="session")
def bilm_tf_dir():
    """`../shared/fixtures/bilm_tf` (outputs of the original TF implementation), or a skip."""
    if not (BILM_TF / "lm_weights.hdf5").exists():
        pytest.skip(f"bilm-tf fixture not found at {BILM_TF} (it ships in ../shared beside the "
                    "project; CI's .ci/run refuses to run without it)")
    return BILM_TF


def write_model(directory, options, weights):
    """Writes options.json + weights.hdf5 (released layout) and returns their paths."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    options_file, weight_file = directory / "options.json", directory / "weights.hdf5"
    options_file.write_text(json.dumps(options))
    with h5py.File(weight_file, "w") as f:
        for name, value in weights.items():
            f.create_dataset(name, data=value)
    return options_file, weight_file


def _tiny(directory):
    options = reference.random_options()
    weights = reference.random_weights(options, seed=1, scale=2.0)
    return (options, weights, *write_model(directory, options, weights))


@pytest.fixture
def tiny_model(tmp_path):
    """A tiny random model with clipping active: (options, weights dict, options_file, weight_file)."""
    return _tiny(tmp_path / "tiny")


@pytest.fixture(scope="module")
def tiny_model_files(tmp_path_factory):
    """`tiny_model`, written once per test module."""
    return _tiny(tmp_path_factory.mktemp("tiny"))


def assert_serializable(layer, *inputs):
    """The layer survives Keras serialization: registered class, equal config, and, given
    inputs, the same dtype policy and outputs once the weights are copied over."""
    import keras
    import numpy as np

    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()
    if inputs:
        expected = layer(*inputs)
        restored(*inputs)
        restored.set_weights(layer.get_weights())
        assert restored.dtype_policy.name == layer.dtype_policy.name
        for got, want in zip(keras.tree.flatten(restored(*inputs)), keras.tree.flatten(expected)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    return restored


def assert_skipping_resumes_exactly(make_dataset):
    """Training batches reproduce from their seed, so that resume can skip the batches already
    trained on: every iterator of `make_dataset(seed)` starts the same order (and masking),
    however many were opened before (Keras opens one to build a model under a strategy, then
    another to train), and another seed gives other batches."""
    import numpy as np
    import tensorflow as tf

    def flat(batches):
        return [x.numpy() for batch in batches for x in tf.nest.flatten(batch)]

    dataset = make_dataset(5)
    first = flat(dataset.take(8))
    next(iter(dataset))
    again = flat(dataset.skip(5).take(3))
    assert len(again) == len(first) * 3 // 8
    for a, b in zip(first[len(first) - len(again):], again):
        np.testing.assert_array_equal(a, b)
    other = flat(make_dataset(6).take(8))
    assert any(not np.array_equal(a, b) for a, b in zip(first, other))


def kill_when(process, condition, timeout):
    """Kills `process` (SIGKILL) as soon as `condition()` holds, polling every few
    milliseconds; kills it anyway after `timeout` seconds; waits for it to end. The caller
    checks `process.returncode == -signal.SIGKILL` (it was killed, not finished first)."""
    import signal
    import time

    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if condition():
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if process.poll() is None and time.monotonic() >= deadline:
            process.kill()
        process.wait()


def kill_while_writing(args, stalled, where, temporary, timeout, **popen):
    """Runs `elmo-tf ARGS` with the write of the file or directory named `stalled` (a regex)
    held before its rename (`tests.stalled_writer`), and kills it (SIGKILL) as soon as a
    temporary of it (`temporary`, a compiled regex) is in the directory `where`, or after
    `timeout` seconds; returns the ended process. `popen`: `subprocess.Popen`'s other
    arguments (cwd, env, stdout, stderr)."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-m", "tests.stalled_writer", stalled, *args],
                               **popen)
    kill_when(process, lambda: os.path.isdir(where) and any(
        temporary.fullmatch(n) for n in os.listdir(where)), timeout)
    return process


def keras_sees_a_gpu(monkeypatch):
    """Keras's LSTM and GRU then take their cuDNN path when traced, as in a process that sees a
    GPU (a CPU has no cuDNN kernel to run it, but a graph can hold the op)."""
    import importlib

    rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")
    monkeypatch.setattr(rnn, "_is_gpu_available", lambda: True)
