"""ELMo's entry in the family registry: how its biLM pre-trains (`ElmoLanguageModel` on
`language_model_dataset`) and reads its files."""

import tensorflow as tf

from elmo_tf.data.language_model_dataset import language_model_dataset
from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.elmo.elmo_language_model import ElmoLanguageModel
from elmo_tf.models.elmo.elmo_tokenizer import ElmoTokenizer
from elmo_tf.models.family import Family


class ElmoFamily(Family):
    """ELMo (Peters et al. 2018): the biLM of two independent directions, pre-trained on both
    next-token losses (recipe objective `"bilm"`), in stream batches (a stateful backbone,
    bilm-tf's) or sentence batches; released AllenNLP/bilm-tf files are its model files.

    Example:
    >>> family_for_objective("bilm").build_language_model(Recipe.from_name("tiny"), 1000)
    """

    name = "elmo"
    objective = "bilm"
    config_class = ElmoConfig
    backbone_class = ElmoBackbone
    tokenizer_class = ElmoTokenizer
    next_token_bound = True
    reads_unmarked_options = True  # released files carry no mark

    def build_language_model(self, recipe, vocabulary_size, replicas=1, dtype=None):
        backbone = ElmoBackbone(recipe.model, stateful=recipe.mode == "stream",
                                max_batch_size=recipe.batch_size // replicas,
                                dropout=recipe.dropout, dtype=dtype)
        lm = ElmoLanguageModel(backbone, vocabulary_size, num_negatives=recipe.num_negatives)
        ids = tf.zeros([1, 1, recipe.model.max_characters_per_token], tf.int32)
        lm({"char_ids": ids, "backward_char_ids": ids} if recipe.mode == "stream"
           else {"char_ids": ids})
        return lm

    def training_batches(self, sentences, vocabulary, recipe, *, per_replica, replicas, seed,
                         pad_to_buckets):
        return language_model_dataset(
            sentences, vocabulary, mode=recipe.mode, batch_size=per_replica * replicas,
            window=recipe.window, shuffle_buffer=recipe.shuffle_buffer, seed=seed,
            replicas=replicas, pad_to_buckets=pad_to_buckets,
            max_characters_per_token=recipe.model.max_characters_per_token)

    def evaluation_batches(self, sentences, vocabulary, recipe, *, pad_to_buckets):
        return language_model_dataset(
            sentences, vocabulary, mode=recipe.mode, batch_size=recipe.batch_size,
            window=recipe.window, repeat=False, pad_to_buckets=pad_to_buckets,
            max_characters_per_token=recipe.model.max_characters_per_token)

    def evaluation_results(self, results):
        # The paper's figure: the mean of the two directions' perplexities.
        return {**results, "average_perplexity": 0.5 * (results["forward_perplexity"]
                                                        + results["backward_perplexity"])}

    def describe(self, results):
        return (f"perplexity: forward {results['forward_perplexity']:.2f}, backward "
                f"{results['backward_perplexity']:.2f}, both {results['perplexity']:.2f}")
