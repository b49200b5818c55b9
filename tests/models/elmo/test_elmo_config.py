import json

import pytest

from elmo_tf import ElmoConfig
from elmo_tf.models.elmo.elmo_presets import RELEASED_FILTERS

ORIGINAL_OPTIONS = {  # the released file, as the spec quotes it (§2)
    "lstm": {"use_skip_connections": True, "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
             "dim": 4096, "n_layers": 2},
    "char_cnn": {"activation": "relu",
                 "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                 "n_highway": 2, "embedding": {"dim": 16}, "n_characters": 262,
                 "max_characters_per_token": 50}}


def test_released_original_options_equal_the_original_preset(tmp_path):
    path = tmp_path / "elmo_2x4096_512_2048cnn_2xhighway_options.json"
    path.write_text(json.dumps(ORIGINAL_OPTIONS))
    config = ElmoConfig.from_options_json(path)
    assert config == ElmoConfig.from_preset("original")
    assert config.num_filters == 2048 and config.output_dim == 1024


@pytest.mark.parametrize("name, dim, proj, highway", [
    ("elmo_small", 1024, 128, 1), ("elmo_medium", 2048, 256, 1), ("elmo_original", 4096, 512, 2)])
def test_presets_are_the_released_shapes(name, dim, proj, highway):
    c = ElmoConfig.from_preset(name)
    assert (c.lstm_dim, c.projection_dim, c.n_highway, c.n_layers) == (dim, proj, highway, 2)
    assert c.filters == RELEASED_FILTERS and c.cell_clip == c.proj_clip == 3.0
    assert c.use_skip_connections and c.char_embedding_dim == 16
    assert ElmoConfig.from_preset(name[len("elmo_"):]) == c  # the 0.1 name
    assert set(ElmoConfig.presets()) == {"tiny", "elmo_cpu", "elmo_small", "elmo_medium",
                                         "elmo_original"}


def test_every_recipe_trains_the_preset_of_its_name():
    from elmo_tf.models.family import preset_names
    from elmo_tf.models.masked_elmo.masked_elmo_config import MaskedElmoConfig
    from elmo_tf.recipes.recipe import Recipe

    assert set(Recipe.names()) == set(preset_names()) == (
        set(ElmoConfig.presets()) | set(MaskedElmoConfig.presets()))
    for name in ElmoConfig.presets():
        assert Recipe.from_name(name).model == ElmoConfig.from_architecture(name)
    for name in MaskedElmoConfig.presets():
        assert Recipe.from_name(name).model == MaskedElmoConfig.from_architecture(name)
        assert Recipe.from_name(name).objective == "masked_lm"


def test_options_json_round_trip_keeps_training_keys(tmp_path, bilm_tf_dir):
    options = json.loads((bilm_tf_dir / "options.json").read_text())
    options.update({"dropout": 0.1, "n_epochs": 10, "unroll_steps": 20})
    config = ElmoConfig.from_options(options)
    assert not config.use_skip_connections and config.training["dropout"] == 0.1
    config.to_options_json(tmp_path / "o.json")
    assert json.loads((tmp_path / "o.json").read_text()) == options
    assert ElmoConfig(**config.to_dict()) == config


def test_missing_optional_keys_take_bilm_tf_meaning():
    options = json.loads(json.dumps(ORIGINAL_OPTIONS))
    for key in ("cell_clip", "proj_clip", "use_skip_connections"):
        del options["lstm"][key]
    del options["char_cnn"]["n_highway"]
    c = ElmoConfig.from_options(options)
    assert c.cell_clip is None and c.proj_clip is None
    assert not c.use_skip_connections and c.n_highway == 0


@pytest.mark.parametrize("edit, match", [
    (lambda o: o["lstm"].update(dimm=3), r"lstm has unknown keys \['dimm'\]"),
    (lambda o: o["lstm"].pop("dim"), r"lstm has missing keys \['dim'\]"),
    (lambda o: o["char_cnn"].pop("filters"), r"char_cnn has missing keys \['filters'\]"),
    (lambda o: o.update(learning_rate=0.2), r"unknown keys \['learning_rate'\]"),
    (lambda o: o.pop("lstm"), "missing the 'lstm' section"),
    (lambda o: o["char_cnn"].update(n_characters=300), "n_characters must be 261"),
    (lambda o: o["char_cnn"].update(activation="gelu"), "activation must be 'relu' or 'tanh'"),
    (lambda o: o["lstm"].update(n_layers=0), "n_layers must be a positive integer"),
    (lambda o: o["char_cnn"].update(filters=[[60, 2]]), r"filter \(60, 2\) needs"),
    (lambda o: o["lstm"].update(cell_clip=-1), "cell_clip must be positive"),
    (lambda o: o["lstm"].update(cell_clip="x"), "cell_clip must be positive or None; got 'x'"),
    (lambda o: o["char_cnn"].update(filters=[[1, "x"]]),
     r"filters must be \(width, n_filters\) pairs of integers; got \(\(1, 'x'\),\)"),
    (lambda o: o["char_cnn"].update(max_characters_per_token="50"),
     "max_characters_per_token must be an integer; got '50'"),
    (lambda o: o["char_cnn"].update(n_highway=1.5), "n_highway must be an integer; got 1.5"),
    (lambda o: o["char_cnn"].update(embedding={"size": 4}), "char_cnn.embedding must be"),
])
def test_bad_options_name_the_key_and_what_is_accepted(tmp_path, edit, match):
    options = json.loads(json.dumps(ORIGINAL_OPTIONS))
    edit(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ValueError, match=match) as info:
        ElmoConfig.from_options_json(path)
    assert str(path) in str(info.value)


def test_invalid_json_and_unknown_preset(tmp_path):
    (tmp_path / "o.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ElmoConfig.from_options_json(tmp_path / "o.json")
    with pytest.raises(ValueError, match=r"unknown ElmoConfig preset 'large'; available: \['tiny'"):
        ElmoConfig.from_preset("large")
