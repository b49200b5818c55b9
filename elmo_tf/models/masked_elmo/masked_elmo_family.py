"""Masked ELMo's entry in the family registry: how it pre-trains (`MaskedElmoLanguageModel` on
`masked_language_model_dataset`) and reads its files."""

import tensorflow as tf

from elmo_tf.data.masked_language_model_dataset import masked_language_model_dataset
from elmo_tf.models.family import Family
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone
from elmo_tf.models.masked_elmo.masked_elmo_config import MaskedElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_language_model import MaskedElmoLanguageModel
from elmo_tf.models.masked_elmo.masked_elmo_tokenizer import MaskedElmoTokenizer

# Every run is scored on the same masking of a held-out corpus: BERT's 15 %, one masking per
# sentence, this seed, whatever the recipe trains with.
HELD_OUT_MASKING_SEED = 0


class MaskedElmoFamily(Family):
    """Masked ELMo (Senay & Salin 2020; `docs/masked_elmo.md`): fully bidirectional LSTM layers
    pre-trained with BERT's masked-LM loss (recipe objective `"masked_lm"`), in sentence
    batches or stream batches read both ways; its model files are ELMo's released layout
    marked by `lstm.fully_bidirectional` in options.json.

    Example:
    >>> family_for_objective("masked_lm").build_language_model(
    ...     Recipe.from_name("tiny_masked"), 1000)
    """

    name = "masked_elmo"
    objective = "masked_lm"
    config_class = MaskedElmoConfig
    backbone_class = MaskedElmoBackbone
    tokenizer_class = MaskedElmoTokenizer
    recipe_fields = ("masks_per_sentence", "selection_rate", "next_token_weight",
                     "cloze_weight", "replaced_token_weight")

    def describes(self, options):
        lstm = options.get("lstm")
        return isinstance(lstm, dict) and "fully_bidirectional" in lstm

    def recipe_problems(self, recipe):
        problems = []
        if recipe.mode == "stream" and recipe.masks_per_sentence != 1:
            problems.append("masks_per_sentence (mask accumulation) copies sentences: it takes "
                            "mode 'sentence'; stream batches take 1")
        k, rate = recipe.masks_per_sentence, recipe.selection_rate
        if isinstance(k, int) and isinstance(rate, (int, float)) and k * rate > 1:
            problems.append(f"masks_per_sentence x selection_rate must be at most 1: the {k} "
                            f"copies of a sentence select disjoint tokens, so each can select "
                            f"at most 1/{k} of them ({1 / k:.0%}); got {k} x {rate:g} = "
                            f"{k * rate:g}")
        for name, loss in (("next_token_weight", "the first layer's next-token loss"),
                           ("cloze_weight", "the first layer's cloze loss"),
                           ("replaced_token_weight", "the replaced-token detection")):
            if recipe.mode == "stream" and getattr(recipe, name):
                problems.append(f"{name} ({loss}) reads sentences: it takes mode 'sentence'")
        if recipe.replaced_token_weight and recipe.next_token_weight:
            problems.append("replaced_token_weight takes no next_token_weight (the "
                            "discriminator reads replaced words, not the masked sentence)")
        return problems

    def training_options(self, recipe):
        return {"masked_lm": {name: getattr(recipe, name) for name in self.recipe_fields}}

    def build_language_model(self, recipe, vocabulary_size, replicas=1, dtype=None):
        stream = recipe.mode == "stream"
        backbone = MaskedElmoBackbone(
            recipe.model, stream_rows=recipe.batch_size // replicas if stream else None,
            dropout=recipe.dropout, dtype=dtype)
        lm = MaskedElmoLanguageModel(backbone, vocabulary_size,
                                     num_negatives=recipe.num_negatives,
                                     next_token_weight=recipe.next_token_weight,
                                     cloze_weight=recipe.cloze_weight,
                                     replaced_token_weight=recipe.replaced_token_weight)
        lm({"char_ids": tf.zeros([1, 1, recipe.model.max_characters_per_token], tf.int32)})
        return lm

    def training_batches(self, sentences, vocabulary, recipe, *, per_replica, replicas, seed,
                         pad_to_buckets):
        # Sentence batches carry no state: each replica takes whole batches in turn. Stream
        # batches are split, so that a replica always gets the same rows.
        stream = recipe.mode == "stream"
        return masked_language_model_dataset(
            sentences, vocabulary, mode=recipe.mode,
            batch_size=per_replica * replicas if stream else per_replica,
            masks_per_sentence=recipe.masks_per_sentence, rate=recipe.selection_rate,
            window=recipe.window, shuffle_buffer=recipe.shuffle_buffer, seed=seed,
            replicas=replicas if stream else 1, pad_to_buckets=pad_to_buckets,
            next_token_targets=recipe.next_token_weight > 0,
            # every token's id: the cloze loss's targets, the replaced-token detection's
            # originals
            cloze_targets=recipe.cloze_weight > 0 or recipe.replaced_token_weight > 0,
            max_characters_per_token=recipe.model.max_characters_per_token)

    def evaluation_batches(self, sentences, vocabulary, recipe, *, pad_to_buckets):
        return masked_language_model_dataset(
            sentences, vocabulary, batch_size=recipe.batch_size, seed=HELD_OUT_MASKING_SEED,
            repeat=False, pad_to_buckets=pad_to_buckets,
            next_token_targets=recipe.next_token_weight > 0,
            cloze_targets=recipe.cloze_weight > 0 or recipe.replaced_token_weight > 0,
            max_characters_per_token=recipe.model.max_characters_per_token)

    def describe(self, results):
        return f"masked-LM perplexity: {results['perplexity']:.2f}"
