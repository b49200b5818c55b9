"""`ToyFamily`: the toy's entry in the family registry."""

import tensorflow as tf

from elmo_tf.models.family import Family
from elmo_tf.text.char_ids import tokens_to_char_ids
from tests.toy_family.toy_backbone import ToyBackbone, ToyConfig
from tests.toy_family.toy_language_model import ToyLanguageModel
from tests.toy_family.toy_settings import ToySettings


class ToyFamily(Family):
    name = "toy"
    objective = "toy_lm"
    config_class = ToyConfig
    backbone_class = ToyBackbone
    settings_class = ToySettings
    recipes = {"toy_tiny": {"model": "toy_tiny", "mode": "sentence", "batch_size": 16,
                            "optimizer": "adam", "learning_rate": 0.05, "dropout": 0.0}}

    def describes(self, options):
        return "toy" in options

    def recipe_problems(self, recipe):
        problems = [] if recipe.mode == "sentence" else ["the toy reads sentence batches only"]
        if not isinstance(recipe.family_settings.reverse, bool):
            problems.append(f"reverse must be true or false; got "
                            f"{recipe.family_settings.reverse!r}")
        return problems

    def build_language_model(self, recipe, vocabulary_size, replicas=1, dtype=None):
        lm = ToyLanguageModel(ToyBackbone(recipe.model, dtype=dtype), vocabulary_size,
                              num_negatives=recipe.num_negatives, dropout=recipe.dropout)
        lm({"char_ids": tf.zeros([1, 1, recipe.model.max_characters_per_token], tf.int32)})
        return lm

    def training_batches(self, sentences, vocabulary, recipe, *, per_replica, replicas, seed,
                         pad_to_buckets):
        return _batches(sentences.shuffle(1000, seed=seed).repeat(), vocabulary,
                        per_replica, recipe)

    def evaluation_batches(self, sentences, vocabulary, recipe, *, pad_to_buckets):
        return _batches(sentences, vocabulary, recipe.batch_size, recipe)


def _batches(sentences, vocabulary, batch_size, recipe):
    max_characters_per_token = recipe.model.max_characters_per_token
    if recipe.family_settings.reverse:
        sentences = sentences.map(lambda tokens: tokens[::-1])

    def encode(tokens):
        ids = vocabulary.lookup(tokens)
        return ({"char_ids": tokens_to_char_ids(tokens[None], max_characters_per_token)[0]},
                {"targets": tf.concat([ids[1:], [-1]], 0)})

    return sentences.map(encode).padded_batch(
        batch_size, padding_values=({"char_ids": 0}, {"targets": -1}))
