"""XLA per replica (`CompiledStep`) without a strategy, the `xla` setting, and the persistent
XLA cache (`elmo_tf.xla_cache`). Under MirroredStrategy: `test_distributed.py`."""

import json
import os
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import xla_cache
from elmo_tf.layers.tokens_to_char_ids import TokensToCharIds
from elmo_tf.models import compiled_step
from elmo_tf.models.compiled_step import CompiledStep
from elmo_tf.models.downstream import TextClassifier
from elmo_tf.ops.lstm import GATE_ROWS_PER_CHUNK
from elmo_tf.recipes.recipe import Recipe
from elmo_tf.training import build_language_model, use_xla
from elmo_tf.training.pretraining import (XLA_CPU_MIN_MINUTES, XLA_CPU_MIN_STEPS,
                                          xla_pays_off_on_cpus)
from tests import subprocesses
from tests.conftest import CPU_ONLY_ENV
from tests.training import RECIPE


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 260, size=(4, 6, 50)).astype("int32")
    ids[:, :, 10:] = 0
    ids[2, 4:] = 0  # a shorter row: padding in the batch
    targets = rng.integers(0, 300, size=(4, 6)).astype("int32")
    targets[2, 4:] = -1
    return {"char_ids": ids}, {"forward_targets": targets,
                               "backward_targets": np.roll(targets, 1, axis=1)}


def _model(xla):
    keras.utils.set_random_seed(0)
    return build_language_model(Recipe.from_dict({**RECIPE, "mode": "sentence"}), 300, xla=xla)


def _trained(xla, steps=3):
    lm = _model(xla)
    x, y = _batch()
    history = lm.fit(tf.data.Dataset.from_tensors((x, y)).repeat(steps), epochs=1, verbose=0)
    return lm, history.history


def test_the_compiled_step_trains_as_the_plain_one(monkeypatch):
    # Full softmax (300 words < num_negatives), no dropout: nothing random in the step. With 8
    # gate rows per chunk the CPU's LSTM computes its gates 2 steps at a time (4 rows), in a
    # branch inside its loop, which the compiled step must leave out (XLA's gradient of it is
    # wrong: tests/layers/test_projected_lstm.py): compiled, it must still train as the plain
    # step with every gate at once (384 rows; the plain step's chunks give the same gates and
    # gradients: `test_gate_inputs_in_chunks_give_the_same_result`).
    monkeypatch.setitem(GATE_ROWS_PER_CHUNK, "CPU", 384)
    plain, plain_logs = _trained(False)
    assert not plain.xla
    start = _model(False)
    for gate_rows in (384, 8):
        monkeypatch.setitem(GATE_ROWS_PER_CHUNK, "CPU", gate_rows)
        compiled, compiled_logs = _trained(True)
        assert compiled.xla
        for name, values in plain_logs.items():
            np.testing.assert_allclose(compiled_logs[name], values, rtol=2e-5,
                                       err_msg=f"{gate_rows}: {name}")
        for a, b in zip(compiled.weights, plain.weights):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{gate_rows}: {a.path}")
        assert all(np.abs(a.numpy() - b.numpy()).max() > 0
                   for a, b in zip(compiled.trainable_weights, start.trainable_weights))


def test_use_xla_and_clear_errors(monkeypatch, tmp_path):
    assert use_xla("on") and not use_xla("off")
    # `train` refuses a bad mode before it reads the corpus or writes anything.
    from elmo_tf import training

    with pytest.raises(ValueError,
                       match=r"xla must be one of \['auto', 'on', 'off'\]; got 'yes'"):
        training.train(Recipe.from_dict(RECIPE), str(tmp_path / "no-corpus"),
                       str(tmp_path / "run"), steps=2, xla="yes")
    assert not (tmp_path / "run").exists()
    assert use_xla("auto") is bool(tf.config.list_logical_devices("GPU"))
    # On CPUs, "auto" is on only where the caller says compiling pays off: pre-training runs
    # long enough to win back the compilation.
    if not tf.config.list_logical_devices("GPU"):
        assert use_xla("auto", cpus=True) is True
        assert use_xla("auto") is False  # fine-tuning: measured slower on CPUs
    assert [xla_pays_off_on_cpus(steps) for steps in (20, XLA_CPU_MIN_STEPS - 1,
                                                      XLA_CPU_MIN_STEPS, 1551)] == [
        False, False, True, True]
    assert [xla_pays_off_on_cpus(None, minutes) for minutes in (
        0.5, XLA_CPU_MIN_MINUTES - 0.1, XLA_CPU_MIN_MINUTES, 30)] == [False, False, True, True]
    with pytest.raises(ValueError,
                       match=r"xla must be one of \['auto', 'on', 'off'\]; got 'yes'"):
        use_xla("yes")
    lm = build_language_model(Recipe.from_dict(RECIPE), 300)
    with pytest.raises(ValueError, match="xla='on' and jit_compile=False disagree"):
        lm.compile(optimizer="adam", xla="on", jit_compile=False)
    from elmo_tf import ElmoBackbone, ElmoConfig, ElmoEmbedding

    classifier = TextClassifier(ElmoEmbedding(ElmoBackbone(ElmoConfig.from_preset("tiny"))),
                                labels=["a", "b"], encoder_units=4, word_embedding_dim=4)
    # "auto" on a GPU (simulated): a task model is numbers only (its preprocessor runs in the
    # input pipeline), so it compiles; a model that reads text in its graph does not.
    monkeypatch.setattr(compiled_step, "use_xla", lambda mode: mode != "off")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classifier.compile()
    # Its preprocessor's word hashing (string ops; `finetune`'s classifiers have it by default)
    # keeps XLA to the per-replica part (`CompiledStep`), without Keras's "Model doesn't
    # support `jit_compile=True`"; the language model compiles whole.
    assert classifier.xla and not classifier.jit_compile
    assert not [w for w in caught if "jit_compile" in str(w.message)], caught
    lm.compile(optimizer="adam")
    assert lm.xla and lm.jit_compile

    class ReadsText(CompiledStep, keras.Model):
        pass

    tokens = keras.Input(shape=(None,), dtype="string")
    reads_text = ReadsText(tokens, classifier.embedding(TokensToCharIds(name="char_ids")(tokens)))
    reads_text.compile(optimizer="adam", loss="mse")
    assert not reads_text.xla
    with pytest.raises(ValueError, match=r"ReadsText \(reads_text.*\) cannot compile "
                                         r".*\['char_ids'\].*--xla off"):
        reads_text.compile(optimizer="adam", loss="mse", xla=True)


def test_auto_compiles_a_pre_training_run_long_enough_to_pay_for_it(corpus, tmp_path,
                                                                    monkeypatch):
    # On CPUs `xla="auto"` compiles a run of at least XLA_CPU_MIN_STEPS steps (lowered here
    # to 2; run.json records the setting and the decision). Shorter runs are not compiled:
    # test_pretraining.py's time budget, and the suite's short runs.
    from elmo_tf import training
    from elmo_tf.training import pretraining

    monkeypatch.setattr(pretraining, "XLA_CPU_MIN_STEPS", 2)
    training.train(Recipe.from_dict(RECIPE), corpus["train"], str(tmp_path), steps=2,
                   verbose=0)
    record = json.loads((tmp_path / "run.json").read_text())
    assert (record["xla"], record["xla_compiled"]) == ("auto", True)


def test_the_cache_directory_is_per_machine_and_can_be_turned_off(tmp_path):
    key = xla_cache.machine_key()
    assert len(key) == 12 and key == xla_cache.machine_key()
    assert xla_cache.directory({"ELMO_TF_XLA_CACHE": "off"}) is None
    assert xla_cache.directory({"ELMO_TF_XLA_CACHE": str(tmp_path)}) == str(tmp_path / key)
    assert xla_cache.directory({"XDG_CACHE_HOME": "/c"}) == f"/c/elmo_tf/xla/{key}"
    environ = {"ELMO_TF_XLA_CACHE": str(tmp_path), "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}
    assert xla_cache.configure(environ) == str(tmp_path / key)
    assert environ["TF_XLA_FLAGS"] == (
        f"--tf_xla_auto_jit=2 --tf_xla_persistent_cache_directory={tmp_path / key}")
    assert (tmp_path / key).is_dir()
    given = {"TF_XLA_FLAGS": "--tf_xla_persistent_cache_directory=/mine"}
    assert xla_cache.configure(given) == "/mine" and given["TF_XLA_FLAGS"].count("=") == 1
    off = {"ELMO_TF_XLA_CACHE": "off"}
    assert xla_cache.configure(off) is None and "TF_XLA_FLAGS" not in off
    # A child process's environment: its own cache, this process's left out, other flags kept.
    mine = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_persistent_cache_directory=/mine",
            "ELMO_TF_XLA_CACHE": "/parent", "PATH": "/bin"}
    child = xla_cache.child_environment(str(tmp_path / "child"), mine)
    assert child == {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2", "PATH": "/bin",
                     "ELMO_TF_XLA_CACHE": str(tmp_path / "child")}
    assert xla_cache.configure(child) == str(tmp_path / "child" / key)
    assert "ELMO_TF_XLA_CACHE" in mine and mine["TF_XLA_FLAGS"].endswith("=/mine")  # untouched
    assert "TF_XLA_FLAGS" not in xla_cache.child_environment("off", {"TF_XLA_FLAGS": (
        "--tf_xla_persistent_cache_directory=/mine")})


def test_a_second_process_finds_the_compiled_program(tmp_path):
    # The same XLA program in three processes: with the cache off nothing is written; with the
    # default cache (under the cache home) the second writes it, the third loads it and writes
    # nothing new. (That `ELMO_TF_XLA_CACHE=DIR` names the directory TensorFlow is given:
    # `test_the_cache_directory_is_per_machine_and_can_be_turned_off`.)
    script = ("import elmo_tf, tensorflow as tf\n"
              "f = tf.function(lambda x: tf.reduce_sum(tf.sin(x) * 2.0), jit_compile=True)\n"
              "print(float(f(tf.ones([7]))))\n")

    home = tmp_path / "home"
    home.mkdir()

    def run(cache):
        # Its own home, cache home and working directory: whatever it writes stays here.
        env = xla_cache.child_environment(cache, dict(
            os.environ, **CPU_ONLY_ENV, TF_CPP_MIN_LOG_LEVEL="3", HOME=str(home),
            XDG_CACHE_HOME=str(home / "cache")))
        done = subprocesses.run([sys.executable, "-c", script], env=env, capture_output=True,
                                text=True, seconds=120, check=False, cwd=home,
                                what="a process with the XLA cache")
        assert done.returncode == 0, done.stderr[-2000:]
        return float(done.stdout.split()[-1])

    def entries(root):  # (Keras writes its ~/.keras/keras.json)
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                      if p.is_file() and ".keras" not in p.parts)

    first = run("off")
    assert entries(home) == []
    assert run("") == first  # the default: under the cache home
    written = entries(home)
    assert len(written) == 1 and written[0].startswith("cache/elmo_tf/") \
        and "/xla_compile_cache" in written[0], written
    stamp = os.stat(home / written[0]).st_mtime_ns
    assert run("") == first
    assert entries(home) == written and os.stat(home / written[0]).st_mtime_ns == stamp


def test_a_saved_task_loads_compiled_as_it_was(tmp_path):
    # A task's `compile` is its own (the `xla` argument): it must still come back compiled
    # from a `.keras` file, as Keras does for models that keep Keras's `compile`.
    from elmo_tf import ElmoBackbone, ElmoConfig, ElmoEmbedding

    keras.utils.set_random_seed(0)
    classifier = TextClassifier(ElmoEmbedding(ElmoBackbone(ElmoConfig.from_preset("tiny"))),
                                labels=["a", "b"], encoder_units=4)
    classifier.compile(optimizer="adam", loss=classifier.task_loss(), metrics=["accuracy"])
    texts, labels = tf.constant(["a b c", "d", "e f"]), np.array([0, 1, 1])
    classifier.save(tmp_path / "m.keras")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert not [w for w in caught if "compile()" in str(w.message)]
    assert loaded.compiled and loaded.xla is False
    expected = classifier.evaluate(texts, labels, return_dict=True, verbose=0)
    got = loaded.evaluate(texts, labels, return_dict=True, verbose=0)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, err_msg=key)
