"""Files elmo-tf 0.1 saved keep loading, with the same outputs (`tests/fixtures/v0_1/make.py`
wrote them with that version, on a CPU without AMX). The outputs are computed on the CPU and
compared to float32 rounding, not bit for bit: they are bit-identical on the development
machine's CPU, but the GPU machine's CPU (AMX: other oneDNN kernels) put them 1.5e-8 apart at
0.012 (relative 5e-6). A misread weight moves them by far more (tests/models/elmo has the
weight-mapping tests)."""

import json
import pathlib
import shutil

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_tf
from elmo_tf.models.elmo.elmo_language_model import ElmoLanguageModel
from tests.training import h5_values

V0_1 = pathlib.Path(__file__).parent / "fixtures" / "v0_1"


def _assert_same(got, expected):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def _fixture():
    return (json.loads((V0_1 / "config.json").read_text()),
            np.load(V0_1 / "expected.npz"))


def test_a_backbone_saved_by_0_1_loads_with_its_outputs():
    _, expected = _fixture()
    backbone = keras.models.load_model(V0_1 / "backbone.keras")
    assert isinstance(backbone, elmo_tf.ElmoBackbone) and backbone.dropout == 0.1
    with tf.device("/CPU:0"):
        layers = backbone(expected["char_ids"])["layers"]
    _assert_same(layers, expected["backbone_layers"])


def test_a_downstream_model_saved_by_0_1_loads_with_its_outputs():
    config, expected = _fixture()
    model = keras.models.load_model(V0_1 / "classifier.keras")
    with tf.device("/CPU:0"):
        scores = model(np.array(config["tokens"]))
    _assert_same(scores, expected["classifier"])


def test_language_model_weights_saved_by_0_1_load():
    config, expected = _fixture()
    backbone = elmo_tf.ElmoBackbone(elmo_tf.ElmoConfig(**config["config"]), stateful=True,
                                    max_batch_size=config["max_batch_size"])
    lm = ElmoLanguageModel(backbone, config["vocabulary_size"],
                           num_negatives=config["num_negatives"])
    ids = expected["char_ids"]
    lm({"char_ids": ids, "backward_char_ids": ids[:, ::-1]})
    lm.load_weights(V0_1 / "language_model.weights.h5")
    with tf.device("/CPU:0"):
        outputs = lm({"char_ids": ids})
    _assert_same(outputs, expected["language_model"])
    # 0.1 kept the softmax as the model's own weights, "vars/0" and "vars/1".
    with h5py.File(V0_1 / "language_model.weights.h5", "r") as f:
        np.testing.assert_array_equal(lm.softmax.kernel, f["vars/0"][...])
        np.testing.assert_array_equal(lm.softmax.bias, f["vars/1"][...])


RUNS = pathlib.Path(__file__).parent / "fixtures" / "runs"


@pytest.mark.parametrize("fixture, recipe", [("elmo_0_1", "tiny"),
                                             ("masked_47014f7", "../masked_cloze.json")])
def test_a_run_killed_under_an_earlier_version_resumes(fixture, recipe, tmp_path, monkeypatch):
    """Runs killed after their last checkpoint (step 3) by elmo-tf 0.1 (ELMo) and by 47014f7
    (Masked ELMo with a cloze loss: its recipe's fields before each family owned its own),
    `tests/fixtures/runs/make.py`: the same command finishes them from that checkpoint (0.1's
    optimizer state read in its order of the variables), and a larger `--steps` goes on."""
    from elmo_tf import cli

    for name in ("corpus.txt", "masked_cloze.json"):
        shutil.copy(RUNS / name, tmp_path / name)
    run = tmp_path / "parent" / "run"
    shutil.copytree(RUNS / fixture, run)
    record = json.loads((run / "run.json").read_text())
    if isinstance(record["settings"]["corpus"], list):
        # Recorded by the corpus file's resolved path: the same file, where this copy has it.
        record["settings"]["corpus"][0]["file"] = str(tmp_path / "corpus.txt")
        (run / "run.json").write_text(json.dumps(record))
    monkeypatch.chdir(tmp_path / "parent")
    command = ["train", "--recipe", recipe, "--corpus", "../corpus.txt", "--output", "run",
               "--seed", "0"]
    saved = h5_values(run / "checkpoints" / "ckpt-000000003.weights.h5")
    assert cli.main(command + ["--steps", "3"]) == 0
    assert (run / "weights.hdf5").exists() and (run / "options.json").exists()
    finished = h5_values(run / "language_model.weights.h5")
    # Finished from the checkpoint, not trained again: the same arrays (their paths are this
    # version's).
    assert _contents(finished) == _contents(saved)
    accumulators = len([n for n in saved if n.startswith("optimizer/vars/")]) - 2
    if fixture == "elmo_0_1":
        # 0.1 listed the softmax's accumulators first; this version lists them last.
        for old, now in ((2, accumulators), (3, accumulators + 1)):
            np.testing.assert_array_equal(finished[f"optimizer/vars/{now}"],
                                          saved[f"optimizer/vars/{old}"])
    assert cli.main(command + ["--steps", "6"]) == 0
    assert (run / "checkpoints" / "ckpt-000000006.weights.h5").exists()
    trained = h5_values(run / "language_model.weights.h5")
    assert _contents(trained) != _contents(saved)


def _contents(arrays):
    """The arrays as a multiset, whatever their paths."""
    return sorted((a.shape, np.asarray(a).tobytes()) for a in arrays.values())
