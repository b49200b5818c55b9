"""Data: corpora (`read_corpus`, the built-in generated corpus), vocabularies counted from them,
language-model and masked-LM batches, and the downstream tasks' files (GLUE, CoNLL, labelled
text). Text itself (char ids, `Vocabulary`, tokenizers) is `elmo_tf.text`."""

from elmo_tf.data.corpus import CorpusStats, read_corpus, read_corpus_batches
from elmo_tf.data.generated_corpus import GeneratedLanguage, write_generated_corpus
from elmo_tf.data.language_model_dataset import language_model_dataset
from elmo_tf.data.masked_language_model_dataset import masked_language_model_dataset
from elmo_tf.data.vocabulary_counts import build_vocabulary
# Moved to elmo_tf.text; kept so earlier code imports (0.1's README: `elmo_tf.data` has it).
from elmo_tf.text import Vocabulary

__all__ = ["CorpusStats", "GeneratedLanguage", "Vocabulary", "build_vocabulary",
           "language_model_dataset", "masked_language_model_dataset", "read_corpus",
           "read_corpus_batches", "write_generated_corpus"]
