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
    # `elmo_original` is the paper's run (`docs/conventions.md` §7: 2x4096/512 LSTMs, the
    # 2048-filter char CNN, 2 highways, clips 3, and `Recipe`'s defaults: stream batches of
    # 20-token windows, 8192 sampled negatives, dropout 0.1, Adagrad 0.2 with initial
    # accumulator 1.0, global-norm clip 10, 10 epochs; bilm-tf ran 128 rows on each of 3 GPUs,
    # so the global batch is 384). `elmo_small` and `elmo_medium` train the released
    # small/medium shapes the same way. `tiny` is a model of a few hundred thousand parameters
    # for tests and the demo.
    recipes = {
        "elmo_original": {"model": "elmo_original", "batch_size": 384},
        "elmo_medium": {"model": "elmo_medium", "batch_size": 384},
        "elmo_small": {"model": "elmo_small", "batch_size": 384},
        "tiny": {"model": "tiny", "batch_size": 32, "epochs": 3},
        # Half an hour on 2 CPU cores for ~1.4 M tokens of real text (bench/downstream.py,
        # bench/elmo_cpu_in_30_minutes.py): Adam, sentence batches (scored as an n-gram model
        # is: each sentence from an empty context), 3,700 steps whatever the corpus, a shuffle
        # buffer that holds the whole corpus (a corpus of documents in order, shuffled 10,000
        # sentences at a time, swings the model from one source to the next every pass).
        "elmo_cpu": {"model": "elmo_cpu", "mode": "sentence", "batch_size": 64,
                     "num_negatives": 2048, "optimizer": "adam", "learning_rate": 2e-3,
                     "epochs": 2, "steps": 3700, "min_count": 2, "shuffle_buffer": 100_000},
    }

    def supervised_predictions(self, recipe, size):
        # Every word and </S> predicted forward, every word and <S> backward.
        return 2 * (size["tokens"] + size["sentences"])

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
