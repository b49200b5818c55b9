"""KerasHub presets: a backbone written by `save_to_preset`, `elmo-tf init` or `train` is read by
KerasHub's own loader (`keras_hub.models.Backbone.from_preset`) in a fresh process with the same
outputs; `from_preset` also reads the family's files alone (runs of earlier versions, AllenNLP's
released files); a preset name, which has no weights, needs `load_weights=False`; the task
models save to and load from task presets, KerasHub's `TextClassifier.from_preset` included."""

import json
import os
import re
import shutil
import sys

import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import cli
from elmo_tf import files
from elmo_tf.models.backbone import Backbone
from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.elmo.elmo_tokenizer import ElmoTokenizer
from elmo_tf.models.load_backbone import load_backbone
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone
from elmo_tf.models.masked_elmo.masked_elmo_tokenizer import MaskedElmoTokenizer
from tests import reference, subprocesses
from elmo_tf.text.char_ids import tokens_to_char_ids
from tests.models.elmo.test_elmo_backbone import _fixture_batches

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENS = [["The", "cat", "sat", "down"], ["Hi", "", "", ""]]


def _loaded_in_a_fresh_process(presets, tmp_path, tokens=TOKENS):
    """[(class name, "layers")] of `keras_hub.models.Backbone.from_preset(preset)` for each of
    `presets`, called in one new Python process that imports nothing of elmo-tf but the
    package."""
    script = (
        "import json, sys, numpy as np, keras_hub, elmo_tf\n"
        "from elmo_tf.text.char_ids import tokens_to_char_ids\n"
        "for index, preset in enumerate(json.loads(sys.argv[1])):\n"
        "    backbone = keras_hub.models.Backbone.from_preset(preset)\n"
        "    ids = tokens_to_char_ids(eval(sys.argv[3]), backbone.max_characters_per_token)\n"
        "    np.save(f'{sys.argv[2]}/layers-{index}.npy', backbone(ids)['layers'].numpy())\n"
        "    print('CLASS', type(backbone).__name__)\n")
    done = subprocesses.run([sys.executable, "-c", script, json.dumps(list(map(str, presets))),
                             str(tmp_path), repr(tokens)], capture_output=True, text=True,
                            cwd=ROOT, seconds=300, what="loading presets in a new process")
    assert done.returncode == 0, done.stderr[-3000:]
    names = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("CLASS ")]
    assert len(names) == len(presets), done.stdout[-2000:]
    return [(name, np.load(tmp_path / f"layers-{index}.npy")) for index, name in enumerate(names)]


def _layers(backbone, tokens=TOKENS):
    ids = tokens_to_char_ids(tokens, backbone.max_characters_per_token)
    return backbone(ids)["layers"].numpy()


def test_released_weights_through_a_keras_hub_preset_keep_bilm_tf_parity(bilm_tf_dir,
                                                                         tmp_path):
    released = tmp_path / "released"  # AllenNLP's files under the names of a model directory
    released.mkdir()
    shutil.copy(bilm_tf_dir / "options.json", released / "options.json")
    shutil.copy(bilm_tf_dir / "lm_weights.hdf5", released / "weights.hdf5")
    ElmoBackbone.from_preset(released).save_to_preset(tmp_path / "preset")
    assert sorted(os.listdir(tmp_path / "preset")) == ["config.json", "metadata.json",
                                                       "model.weights.h5"]
    tokens, expected = next(_fixture_batches(bilm_tf_dir))
    (name, layers), = _loaded_in_a_fresh_process([tmp_path / "preset"], tmp_path, tokens)
    assert name == "ElmoBackbone"
    for k in range(3):
        np.testing.assert_allclose(layers[k, 2, :len(tokens[k])], expected[k], atol=1e-5)


def test_init_writes_a_model_directory_keras_hub_loads(tmp_path, capsys):
    """Each family's `init`; both directories loaded in one new process."""
    presets = ("tiny", "tiny_masked")
    directories = [tmp_path / preset for preset in presets]
    for preset, directory in zip(presets, directories):
        assert cli.main(["init", "--preset", preset, "--output", str(directory), "--seed",
                         "3"]) == 0
        assert "KerasHub preset" in capsys.readouterr().out
        assert {"options.json", "weights.hdf5", "config.json", "metadata.json",
                "model.weights.h5"} <= set(os.listdir(directory))
    loaded = _loaded_in_a_fresh_process(directories, tmp_path)
    for preset, directory, (name, layers) in zip(presets, directories, loaded):
        metadata = json.loads((directory / "metadata.json").read_text())
        tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(str(directory))
        assert type(tokenizer) is {"tiny": ElmoTokenizer,
                                   "tiny_masked": MaskedElmoTokenizer}[preset]
        assert tokenizer.tokenizer == "whitespace"
        np.testing.assert_allclose(  # the tokenizer's char ids are what the backbone reads
            _layers(Backbone.from_preset(directory)),
            Backbone.from_preset(directory)(tokenizer([" ".join(t) for t in TOKENS]))[
                "layers"].numpy(), atol=1e-6)
        os.remove(directory / "config.json")  # as a run of an earlier version: its own loader
        from_family_files = Backbone.from_preset(directory)
        assert name == type(from_family_files).__name__, preset
        np.testing.assert_allclose(layers, _layers(from_family_files), atol=1e-6,
                                   err_msg=preset)
        assert metadata["parameter_count"] == from_family_files.count_params()


def test_save_to_preset_round_trips_with_constructor_arguments(tmp_path):
    masked = MaskedElmoBackbone.from_architecture("tiny_masked")
    masked.save_to_preset(tmp_path / "masked")
    loaded = MaskedElmoBackbone.from_preset(tmp_path / "masked", dropout=0.25)
    assert loaded.dropout == 0.25 and loaded.config == masked.config
    np.testing.assert_allclose(_layers(loaded), _layers(masked), atol=1e-6)

    elmo = ElmoBackbone(ElmoConfig.from_architecture("tiny"))
    elmo.save_to_preset(tmp_path / "elmo")
    stateful = keras_hub.models.Backbone.from_preset(str(tmp_path / "elmo"), stateful=True,
                                                     max_batch_size=2)
    assert stateful.stateful and stateful.max_batch_size == 2
    np.testing.assert_allclose(_layers(stateful), _layers(elmo), atol=1e-6)  # the first call
    with pytest.raises(ValueError, match="not a subclass of calling class"):
        ElmoBackbone.from_preset(tmp_path / "masked")


def test_a_preset_name_has_no_weights_unless_asked_for_fresh_ones():
    with pytest.raises(ValueError, match=r"load_weights=False"):
        ElmoBackbone.from_preset("tiny")
    fresh = MaskedElmoBackbone.from_preset("tiny_masked", load_weights=False)
    assert fresh.config == MaskedElmoBackbone.from_architecture("tiny_masked").config
    with pytest.raises(ValueError, match="not a directory.*unknown preset 'tinny'"):
        Backbone.from_preset("tinny", load_weights=False)


def test_a_failed_save_to_preset_leaves_no_preset_of_two_models(tmp_path, monkeypatch):
    directory = tmp_path / "preset"
    ElmoBackbone(ElmoConfig.from_architecture("tiny")).save_to_preset(directory)
    rename = os.replace

    def fails_on_the_weights(source, target):
        if os.path.basename(target) == "model.weights.h5":
            raise OSError("disk full")
        return rename(source, target)

    monkeypatch.setattr(files.os, "replace", fails_on_the_weights)
    with pytest.raises(OSError, match="disk full"):
        MaskedElmoBackbone.from_architecture("tiny_masked").save_to_preset(directory)
    monkeypatch.undo()
    # The old config is gone before anything new is written, and nothing half-written stays
    # (the staging directory is removed).
    assert sorted(os.listdir(directory)) == ["metadata.json", "model.weights.h5"]
    with pytest.raises(ValueError, match="has no config.json"):
        keras_hub.models.Backbone.from_preset(str(directory))
    # A write that succeeds makes it a preset again.
    MaskedElmoBackbone.from_architecture("tiny_masked").save_to_preset(directory)
    assert type(keras_hub.models.Backbone.from_preset(str(directory))) is MaskedElmoBackbone


@pytest.mark.parametrize("name", ["whitespace", "wordpunct"])
def test_the_tokenizer_gives_the_spec_char_ids_and_reads_back(name):
    tokenizer = ElmoTokenizer(name, max_characters_per_token=12)
    texts = ["The  cat's hat , déjà-vu", "", "supercalifragilistic </S>"]
    split = {"whitespace": str.split,
             "wordpunct": lambda t: re.findall(r"\w+|[^\w\s]+", t)}[name]
    tokens = [split(text) for text in texts]
    time = max(1, max(len(t) for t in tokens))
    expected = np.zeros([len(texts), time, 12], np.int32)
    for i, row in enumerate(tokens):
        for j, token in enumerate(row):
            expected[i, j] = reference.char_ids(token, 12)
    np.testing.assert_array_equal(tokenizer(texts), expected)
    np.testing.assert_array_equal(tokenizer(texts[0]), expected[0])  # one sentence
    # Back to text: the tokens (cut at 10 bytes), joined by one space; </S> is no text.
    cut = [b" ".join(t.encode()[:10] for t in row if t != "</S>") for row in tokens]
    assert tokenizer.detokenize(tokenizer(texts)).numpy().tolist() == cut
    config = tokenizer.get_config()
    assert ElmoTokenizer.from_config(config).get_config() == config
    mapped = tf.data.Dataset.from_tensor_slices(texts).batch(3).map(tokenizer)
    np.testing.assert_array_equal(next(iter(mapped)), expected)


def test_the_tokenizer_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        ElmoTokenizer("spaces")
    with pytest.raises(ValueError, match="at least 4"):
        ElmoTokenizer(max_characters_per_token=2)
    with pytest.raises(TypeError, match="takes sentences"):
        ElmoTokenizer()(tf.constant([1, 2]))


def test_a_foreign_config_json_beside_the_family_files_is_not_taken_for_a_preset(tmp_path):
    directory = tmp_path / "model"
    assert cli.main(["init", "--preset", "tiny", "--output", str(directory)]) == 0
    expected = _layers(Backbone.from_preset(directory))
    assert type(ElmoTokenizer.from_preset(directory)) is ElmoTokenizer  # a pathlib.Path
    (directory / "config.json").write_text(json.dumps({"trainer": {"num_epochs": 10}}))
    np.testing.assert_array_equal(_layers(Backbone.from_preset(directory)), expected)


def test_model_files_that_fail_to_be_written_again_leave_the_old_model_whole(tmp_path,
                                                                              monkeypatch):
    from elmo_tf.training.run_directory import write_model_files

    old = ElmoBackbone(ElmoConfig.from_architecture("tiny"))
    write_model_files(old, tmp_path)
    new = ElmoBackbone(ElmoConfig.from_architecture("tiny"))
    monkeypatch.setattr(ElmoTokenizer, "save_to_preset", lambda self, d: (_ for _ in ()).throw(
        OSError("disk full")))
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OSError, match="disk full"):
        write_model_files(new, tmp_path)  # the family's files staged, the preset not yet
    monkeypatch.undo()
    # Nothing of the failed write was moved in: the old model, whole, in both formats.
    assert sorted(os.listdir(tmp_path)) == before
    np.testing.assert_array_equal(_layers(Backbone.from_preset(tmp_path)), _layers(old))
    np.testing.assert_array_equal(
        _layers(load_backbone(tmp_path / "options.json", tmp_path / "weights.hdf5")),
        _layers(old))


def test_a_family_whose_classes_keras_cannot_find_is_refused(monkeypatch):
    from elmo_tf.models import family
    from tests.toy_family import ToyFamily
    from tests.toy_family.toy_backbone import ToyBackbone

    monkeypatch.setattr(family, "_FAMILIES", dict(family._FAMILIES))

    class Unregistered(ToyBackbone):
        pass

    toy = ToyFamily()
    toy.backbone_class = Unregistered
    with pytest.raises(ValueError, match="Unregistered is not registered with Keras"):
        family.register_family(toy)


def test_importing_elmo_tf_leaves_tensorflow_unstarted():
    """A strategy's logical devices are made before TensorFlow starts: after `import elmo_tf`
    too (`elmo-tf train --strategy mirrored`, `finetune --strategy mirrored`)."""
    script = ("import elmo_tf, elmo_tf.models, elmo_tf.training.finetuning\n"
              "import tensorflow as tf\n"
              "cpu = tf.config.list_physical_devices('CPU')[0]\n"
              "tf.config.set_logical_device_configuration(\n"
              "    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
              "print(len(tf.config.list_logical_devices('CPU')))\n")
    done = subprocesses.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT, seconds=300, what="logical CPUs in a new process")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "2"


TASKS_LOAD = """
import json, sys
import keras_hub, tensorflow as tf
import elmo_tf  # registers the classes
from elmo_tf.models.downstream import DownstreamTask
out = {}
for name, inputs in json.loads(sys.argv[1]).items():
    preset = sys.argv[2] + "/" + name
    load = keras_hub.models.TextClassifier.from_preset if name.startswith("classifier") \\
        else DownstreamTask.from_preset
    model = load(preset)
    x = {k: tf.constant(v) for k, v in inputs.items()} if isinstance(inputs, dict) \\
        else tf.constant(inputs)
    out[name] = [type(model).__name__, type(model.backbone).__name__,
                 model.predict(x, verbose=0).tolist()]
print("OUT" + json.dumps(out))
"""


def test_task_presets_load_in_a_fresh_process_through_keras_hub(tmp_path):
    """Each task and each family (the classifier on both, the tagger on ELMo, the pair on
    Masked ELMo: a task's preset is the same code on either): `save_to_preset`, then in a
    new process KerasHub's `TextClassifier.from_preset` (a classifier: KerasHub finds our
    class by the preset's backbone) or `DownstreamTask.from_preset`, the same predictions on
    raw text; a backbone's preset alone makes no task, with a message that says how to build
    one."""
    from elmo_tf import ElmoEmbedding
    from elmo_tf.models.downstream import (
        DownstreamTask,
        SentencePairClassifier,
        SequenceTagger,
        TextClassifier,
    )

    backbones = {"elmo": ElmoBackbone.from_architecture("tiny"),
                 "masked": MaskedElmoBackbone.from_architecture("tiny_masked")}
    inputs = {"classifier": ["a good film", "bad"], "tagger": ["a b c", "d"],
              "pair": {"text_a": ["a b", "c"], "text_b": ["d", "e f g"]}}
    expected, requests = {}, {}
    for family, backbone in backbones.items():
        embedding = ElmoEmbedding(backbone)
        models = {"classifier": TextClassifier(embedding, labels=["neg", "pos"],
                                               encoder_units=4, word_embedding_dim=3)}
        if family == "elmo":
            models["tagger"] = SequenceTagger(embedding, tags=["O", "X"], encoder_units=4)
        else:
            models["pair"] = SentencePairClassifier(embedding, labels=None, encoder_units=4,
                                                    hidden_dim=4)
        for task, model in models.items():
            x = inputs[task]
            x = {k: tf.constant(v) for k, v in x.items()} if isinstance(x, dict) \
                else tf.constant(x)
            name = f"{task}-{family}"
            model.save_to_preset(tmp_path / name)
            expected[name] = [type(model).__name__, type(backbone).__name__,
                              model.predict(x, verbose=0)]
            requests[name] = inputs[task]
    done = subprocesses.run([sys.executable, "-c", TASKS_LOAD, json.dumps(requests),
                             str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                            seconds=600, what="loading task presets in a new process")
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.split("OUT", 1)[1])
    for name, (cls, backbone, values) in expected.items():
        assert got[name][:2] == [cls, backbone], name
        np.testing.assert_allclose(got[name][2], values, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not any(files.is_temporary(name) for name in os.listdir(tmp_path / "pair-masked"))
    # KerasHub's way to a new classifier of a biLM: its preset and num_classes.
    backbones["elmo"].save_to_preset(tmp_path / "bilm")
    fresh = keras_hub.models.TextClassifier.from_preset(str(tmp_path / "bilm"), num_classes=3)
    assert type(fresh) is TextClassifier and fresh.labels == ["0", "1", "2"]
    np.testing.assert_array_equal(_layers(fresh.backbone), _layers(backbones["elmo"]))
    assert not fresh.embedding.fine_tune  # a frozen biLM, as finetune's default
    assert TextClassifier.from_preset(tmp_path / "bilm", num_classes=2).labels == ["0", "1"]
    with pytest.raises(ValueError, match="needs num_classes"):
        keras_hub.models.TextClassifier.from_preset(str(tmp_path / "bilm"))
    # A task preset with num_classes: the task's embedding (its mix too) under a new head.
    task = keras_hub.models.TextClassifier.from_preset(str(tmp_path / "classifier-masked"),
                                                       num_classes=4)
    assert task.labels == ["0", "1", "2", "3"]
    trained = DownstreamTask.from_preset(tmp_path / "classifier-masked")
    for new, old in zip(task.embedding.weights, trained.embedding.weights):
        np.testing.assert_array_equal(new.numpy(), old.numpy())
    with pytest.raises(FileNotFoundError, match="holds no task preset"):
        DownstreamTask.from_preset(tmp_path / "bilm")
    with pytest.raises(ValueError, match="holds a 'elmo_tf>SequenceTagger', not a "
                                         "TextClassifier"):
        TextClassifier.from_preset(tmp_path / "tagger-elmo")


@pytest.mark.parametrize("backbone_class, architecture", [(ElmoBackbone, "tiny"),
                                                          (MaskedElmoBackbone, "tiny_masked")])
def test_a_classifier_of_a_bilm_preset_splits_sentences_as_its_corpus_was(
        tmp_path, backbone_class, architecture):
    """KerasHub's loader and ours make a classifier of a biLM's preset with the preset's
    tokenizer (tokenizer.json: its corpus's splitting, here wordpunct), not whitespace; a
    backbone's preset without a tokenizer gives whitespace; a tokenizer given that contradicts
    the preset's is refused."""
    from elmo_tf.models.downstream import TextClassifier
    from elmo_tf.training.run_directory import write_model_files

    backbone = backbone_class.from_architecture(architecture)
    write_model_files(backbone, str(tmp_path / "run"), tokenizer="wordpunct")
    backbone.save_to_preset(tmp_path / "backbone")
    sentence = tf.constant(["A fine film, really."])  # wordpunct: 6 tokens; whitespace: 4
    for load in (keras_hub.models.TextClassifier.from_preset, TextClassifier.from_preset):
        model = load(str(tmp_path / "run"), num_classes=2, word_embedding_dim=3)
        assert type(model) is TextClassifier and model.tokenizer == "wordpunct"
        features = model.preprocessor(sentence)
        assert features["char_ids"].shape[:2] == features["word_ids"].shape == (1, 6)
        assert TextClassifier.from_config(model.get_config()).tokenizer == "wordpunct"
        model = load(str(tmp_path / "backbone"), num_classes=2)
        assert model.tokenizer == "whitespace"
        assert model.preprocessor(sentence)["char_ids"].shape[:2] == (1, 4)
    with pytest.raises(ValueError, match=r"tokenizer='whitespace', but the preprocessor \(the "
                                         r"biLM preset's\) splits with 'wordpunct'"):
        TextClassifier.from_preset(str(tmp_path / "run"), num_classes=2,
                                   tokenizer="whitespace")
    # A corpus split with tensorflow-text's tokenizer: the task needs a core one, named.
    write_model_files(backbone, str(tmp_path / "script"), tokenizer="unicode_script")
    with pytest.raises(ValueError, match="split with 'unicode_script', which a task model "
                                         "cannot use"):
        TextClassifier.from_preset(str(tmp_path / "script"), num_classes=2)
    assert TextClassifier.from_preset(str(tmp_path / "script"), num_classes=2,
                                      tokenizer="wordpunct").tokenizer == "wordpunct"
