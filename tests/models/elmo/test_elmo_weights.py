import json
import os

import h5py
import numpy as np
import pytest

from elmo_tf import ElmoBackbone, ElmoConfig, tokens_to_char_ids
from tests.conftest import write_model


def _datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset) else None)
    return out


def test_save_reproduces_the_released_file_exactly(bilm_tf_dir, tmp_path):
    backbone = ElmoBackbone.from_allennlp(bilm_tf_dir / "options.json",
                                          bilm_tf_dir / "lm_weights.hdf5")
    backbone.save_allennlp(tmp_path / "w.hdf5", tmp_path / "o.json")
    original, written = _datasets(bilm_tf_dir / "lm_weights.hdf5"), _datasets(tmp_path / "w.hdf5")
    assert sorted(original) == sorted(written)
    for name in original:
        assert written[name].dtype == np.float32
        np.testing.assert_array_equal(written[name], original[name], err_msg=name)
    reloaded = ElmoBackbone.from_allennlp(tmp_path / "o.json", tmp_path / "w.hdf5")
    ids = tokens_to_char_ids([["a", "round", "trip"]])
    np.testing.assert_array_equal(reloaded(ids)["layers"], backbone(ids)["layers"])


def test_random_model_round_trips_with_projection_and_highways(tmp_path):
    config = ElmoConfig(lstm_dim=8, projection_dim=4, n_layers=3, char_embedding_dim=2,
                        filters=((1, 3), (2, 3)), n_highway=2, cell_clip=3, proj_clip=3,
                        use_skip_connections=True)
    backbone = ElmoBackbone(config)
    backbone.save_allennlp(tmp_path / "w.hdf5", tmp_path / "o.json")
    names = set(_datasets(tmp_path / "w.hdf5"))
    assert {"CNN_proj/W_proj", "CNN_high_1/W_carry",
            "RNN_1/RNN/MultiRNNCell/Cell2/LSTMCell/W_P_0"} <= names
    clone = ElmoBackbone.from_allennlp(tmp_path / "o.json", tmp_path / "w.hdf5")
    for a, b in zip(backbone.weights, clone.weights):
        np.testing.assert_array_equal(a, b)


def test_no_projection_when_the_cnn_width_equals_projection_dim(tmp_path):
    config = ElmoConfig(lstm_dim=8, projection_dim=6, n_layers=1, char_embedding_dim=2,
                        filters=((1, 2), (2, 4)))
    backbone = ElmoBackbone(config)
    backbone.save_allennlp(tmp_path / "w.hdf5")
    assert backbone.token_encoder.projection is None
    assert not [n for n in _datasets(tmp_path / "w.hdf5") if n.startswith("CNN_proj")]


def _tampered(bilm_tf_dir, tmp_path, edit):
    weights = _datasets(bilm_tf_dir / "lm_weights.hdf5")
    edit(weights)
    options = json.loads((bilm_tf_dir / "options.json").read_text())
    return write_model(tmp_path / "bad", options, weights)


@pytest.mark.parametrize("edit, match", [
    (lambda w: w.pop("CNN/W_cnn_3"),
     r"missing dataset 'CNN/W_cnn_3' \(expected shape \(1, 4, 4, 32\)\)"),
    (lambda w: w.__setitem__("CNN_proj/W_proj", np.zeros((124, 17), np.float32)),
     r"dataset 'CNN_proj/W_proj' has shape \(124, 17\), but the options need \(124, 16\)"),
    (lambda w: w.__setitem__("RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0",
                             np.zeros((32, 128), np.float32)),
     r"'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0' has shape \(32, 128\), but the options need "
     r"\(32, 256\)"),
    (lambda w: w.__setitem__("CNN_high_2/W_carry", np.zeros((124, 124), np.float32)),
     r"datasets \['CNN_high_2/W_carry'\] are not part of the model"),
    (lambda w: w.__setitem__("CNN/b_cnn_0", np.full(w["CNN/b_cnn_0"].shape, "x", "S1")),
     r"dataset 'CNN/b_cnn_0' holds \|S1, not numbers"),
    (lambda w: w["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B"].__setitem__(3, np.nan),
     r"dataset 'RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B' holds 1 NaN or infinite values"),
])
def test_mismatched_files_name_the_dataset_and_both_shapes(bilm_tf_dir, tmp_path, edit, match):
    options_file, weight_file = _tampered(bilm_tf_dir, tmp_path, edit)
    with pytest.raises(ValueError, match=match):
        ElmoBackbone.from_allennlp(options_file, weight_file)


def test_unreadable_weight_file(tmp_path, bilm_tf_dir):
    (tmp_path / "w.hdf5").write_text("not hdf5")
    with pytest.raises(ValueError, match="cannot read it as an hdf5 weight file"):
        ElmoBackbone.from_allennlp(bilm_tf_dir / "options.json", tmp_path / "w.hdf5")


def test_a_failed_save_leaves_nothing_behind(tmp_path, monkeypatch):
    backbone = ElmoBackbone(ElmoConfig(lstm_dim=4, projection_dim=2, n_layers=1,
                                       char_embedding_dim=2, filters=((1, 2),)))
    target = tmp_path / "w.hdf5"
    target.write_bytes(b"previous")

    def broken(self, name, data):
        raise OSError("disk full")

    monkeypatch.setattr(h5py.Group, "create_dataset", broken)
    with pytest.raises(OSError, match="disk full"):
        backbone.save_allennlp(target)
    assert target.read_bytes() == b"previous" and os.listdir(tmp_path) == ["w.hdf5"]
