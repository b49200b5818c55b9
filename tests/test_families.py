"""A model family is a folder and a registry entry: a toy third family (tests/toy_family)
trains, evaluates, dumps and exports through the command line, with nothing in
elmo_tf/training, elmo_tf/export or elmo_tf/cli.py that names it."""

import json

import h5py
import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import cli
from elmo_tf.models import family
from elmo_tf.models.backbone import Backbone
from elmo_tf.recipes import Recipe
from tests.checks import run_backbone_test
from tests.toy_family import ToyFamily
from tests.toy_family.toy_backbone import ToyBackbone, ToyConfig

WORDS = ["the", "cat", "dog", "sees", "runs", "a", "bird", "sings"]


@pytest.fixture
def toy_family(monkeypatch):
    """The toy registered for this test only (the registry is restored afterwards)."""
    monkeypatch.setattr(family, "_FAMILIES", dict(family._FAMILIES))
    assert "toy_tiny" not in Recipe.names()
    family.register_family(ToyFamily())


def _corpus(path, n, seed):
    rng = np.random.default_rng(seed)
    path.write_text("".join(" ".join(rng.choice(WORDS, rng.integers(2, 7))) + "\n"
                            for _ in range(n)))
    return str(path)


def test_a_third_family_trains_evaluates_dumps_and_exports_through_the_cli(
        toy_family, tmp_path, capsys):
    corpus, heldout = _corpus(tmp_path / "train.txt", 400, 0), _corpus(tmp_path / "dev.txt", 40, 1)
    # The family's own named recipe, from its folder alone (`ToyFamily.recipes`).
    assert "toy_tiny" in Recipe.names() and Recipe.from_name("toy_tiny").objective == "toy_lm"
    run = tmp_path / "run"
    assert cli.main(["train", "--recipe", "toy_tiny", "--corpus", corpus, "--validation",
                     heldout, "--steps", "40", "--output", str(run)]) == 0
    trained = capsys.readouterr().out
    assert "held-out perplexity:" in trained
    # 8 words and </S> (and the specials) in the vocabulary: a model that learned nothing
    # would be near 12; the toy's running means learn the words' frequencies at least.
    held_out = float(trained.split("held-out perplexity:")[1].split()[0])
    assert held_out < 9.0

    assert cli.main(["evaluate", "--model", str(run), "--corpus", heldout]) == 0
    evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert evaluated["perplexity"] == pytest.approx(held_out, abs=0.01)

    backbone = Backbone.from_preset(str(run))
    assert type(backbone).__name__ == "ToyBackbone"
    # The run is a KerasHub preset too, which KerasHub's own loader reads.
    from_keras_hub = keras_hub.models.Backbone.from_preset(str(run))
    assert type(from_keras_hub) is type(backbone)
    sentences = tmp_path / "in.txt"
    sentences.write_text("the cat sees a bird\ndog runs\n")
    assert cli.main(["dump", str(sentences), str(tmp_path / "vec.hdf5"), "--model",
                     str(run)]) == 0
    with h5py.File(tmp_path / "vec.hdf5", "r") as f:
        dumped = f["0"][()]
    assert dumped.shape == (2, 5, 16)
    expected = backbone.embed(_char_ids(["the", "cat", "sees", "a", "bird"]))
    np.testing.assert_allclose(dumped, expected["layers"][0], atol=1e-6)
    np.testing.assert_allclose(from_keras_hub.embed(_char_ids(["the", "cat", "sees", "a",
                                                               "bird"]))["layers"][0],
                               dumped, atol=1e-6)

    assert cli.main(["export", "--model", str(run), "--output", str(tmp_path / "serving")]) == 0
    served = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures["default"](
        default=tf.constant(["the cat sees a bird"]))
    assert served["lstm_outputs1"].shape == (1, 5, 16)
    np.testing.assert_allclose(served["lstm_outputs1"][0], dumped[1], atol=1e-6)


def test_the_toy_backbone_keeps_the_backbone_contract(tmp_path):
    """`run_backbone_test` takes any family's backbone: the toy's tokens are 20 characters
    wide, not ELMo's 50."""
    def make_backbone(**kwargs):
        keras.utils.set_random_seed(0)
        return ToyBackbone(ToyConfig.from_architecture("toy_tiny"), **kwargs)

    assert make_backbone().max_characters_per_token == 20
    run_backbone_test(make_backbone, tmp_path)


def test_a_family_owns_its_hyper_parameters(toy_family, tmp_path):
    """The toy's `reverse` (`ToyFamily.settings_class`), from its folder alone: a key of its
    recipe files and run.json, refused in another family's recipe, read by its batches."""
    from elmo_tf.training.run_directory import RunDirectory

    recipe_file = tmp_path / "reverse.json"
    recipe_file.write_text(json.dumps({"base": "toy_tiny", "reverse": True}))
    recipe = Recipe.from_file(str(recipe_file))
    assert recipe.family_settings.reverse is True
    assert Recipe.from_name("toy_tiny").family_settings.reverse is False
    with pytest.raises(ValueError, match="reverse is the 'toy_lm' objective's; leave it out "
                                         "of a 'bilm' recipe"):
        Recipe.from_dict({"base": "tiny", "reverse": True})
    with pytest.raises(ValueError, match="reverse must be true or false; got 'yes'"):
        Recipe.from_dict({"base": "toy_tiny", "reverse": "yes"})
    with pytest.raises(ValueError, match=r"unknown recipe keys \['selection_rat'\]; accepted: "
                                         r"\[.*'reverse'\]"):
        Recipe.from_dict({"base": "toy_tiny", "selection_rat": 0.2})

    # Its batches read each sentence backwards: the target of a word is the word before it.
    vocabulary = _vocabulary()
    sentence = tf.data.Dataset.from_tensors(tf.constant(["the", "cat", "sees"]))
    (_, targets), = recipe.family.evaluation_batches(sentence, vocabulary, recipe,
                                                     pad_to_buckets=False)
    np.testing.assert_array_equal(targets["targets"][0],
                                  vocabulary.lookup(tf.constant(["cat", "the"])).numpy().tolist()
                                  + [-1])

    corpus, run = _corpus(tmp_path / "train.txt", 100, 0), tmp_path / "run"
    command = ["train", "--recipe", str(recipe_file), "--corpus", corpus, "--steps", "2",
               "--output", str(run)]
    assert cli.main(command) == 0
    recorded = json.loads((run / "run.json").read_text())["settings"]["recipe"]
    assert recorded["reverse"] is True
    assert RunDirectory(str(run)).recipe() == recipe
    assert cli.main(command) == 0  # the same run: it resumes (finished), no difference


def _vocabulary():
    from elmo_tf.text.vocabulary import Vocabulary

    return Vocabulary(["<S>", "</S>", "<UNK>"] + WORDS)


@pytest.mark.parametrize("recipe, per_pass", [
    # ELMo: every word and </S> predicted forward, every word and <S> backward.
    ({"base": "tiny"}, 2 * (1000 + 100)),
    # The masked LM: the selected share of the words; K copies select disjoint shares.
    ({"base": "tiny_masked", "selection_rate": 0.4}, 400),
    ({"base": "tiny_masked", "masks_per_sentence": 2}, 300),
    ({"base": "tiny_masked", "masks_per_sentence": 2, "selection_rate": 0.5}, 1000),
    # Its first layer's next-token loss adds ELMo's predictions (on each copy), the cloze
    # loss and the replaced-token detection one target per word.
    ({"base": "tiny_masked", "next_token_weight": 1.0}, 150 + 2200),
    ({"base": "tiny_masked", "masks_per_sentence": 2, "next_token_weight": 0.5}, 300 + 4400),
    ({"base": "tiny_masked", "selection_rate": 0.4, "cloze_weight": 1.0}, 400 + 1000),
    # On stream windows of 10 tokens the cloze loss leaves out each window's first and last.
    ({"base": "tiny_masked", "mode": "stream", "window": 10, "cloze_weight": 1.0},
     150 + 800),
    ({"base": "tiny_masked", "replaced_token_weight": 50.0, "cloze_weight": 1.0},
     150 + 1000 + 1000),
])
def test_each_family_counts_the_predictions_its_objective_is_trained_on(recipe, per_pass):
    """What run.json records per step (`supervised_predictions_per_step`) and the protocol
    compares objectives by, for a corpus of 1000 words in 100 sentences."""
    recipe = Recipe.from_dict(recipe)
    size = {"tokens": 1000, "sentences": 100}
    assert recipe.family.supervised_predictions(recipe, size) == pytest.approx(per_pass)


def test_a_familys_recipe_names_are_its_own(toy_family):
    class Copy(ToyFamily):
        name, objective = "toy_copy", "toy_copy_lm"

    with pytest.raises(ValueError, match="recipe 'toy_tiny'"):
        family.register_family(Copy())


def _char_ids(tokens):
    from elmo_tf.text.char_ids import tokens_to_char_ids

    return tokens_to_char_ids([tokens], 20)


def test_the_hallways_name_no_family_or_task_and_dispatch_on_neither():
    """No `objective ==`, no import of a family's or a task's class, no isinstance of one in
    elmo_tf/training, elmo_tf/export and elmo_tf/cli.py: they use the registries and the
    classes' own methods."""
    import pathlib
    import re

    package = pathlib.Path(__file__).resolve().parents[1] / "elmo_tf"
    hallways = [*(package / "training").glob("*.py"), *(package / "export").glob("*.py"),
                package / "cli.py"]
    code = {path: [line for line in path.read_text().splitlines()
                   if not line.strip().startswith(("#", '"', "'"))] for path in hallways}
    classes = (r"ElmoBackbone|MaskedElmo\w+|ElmoLanguageModel|ElmoConfig|TextClassifier|"
               r"SentencePairClassifier|SequenceTagger")
    forbidden = re.compile(rf"objective\s*==|task\s*==|import .*\b({classes})\b|"
                           rf"isinstance\(\w+, \(?({classes})")
    found = [f"{path.name}: {line.strip()}" for path, lines in code.items() for line in lines
             if forbidden.search(line)]
    assert found == []
