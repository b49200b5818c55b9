"""Input pipelines: ELMo char ids, corpora, vocabularies, language-model and masked-LM batches,
and a built-in generated corpus."""

from elmo_tf.data.char_ids import tokens_to_char_ids
from elmo_tf.data.corpus import CorpusStats, read_corpus, read_corpus_batches
from elmo_tf.data.generated_corpus import GeneratedLanguage, write_generated_corpus
from elmo_tf.data.language_model_dataset import language_model_dataset
from elmo_tf.data.masked_language_model_dataset import masked_language_model_dataset
from elmo_tf.data.vocabulary import Vocabulary, build_vocabulary

__all__ = ["CorpusStats", "GeneratedLanguage", "Vocabulary", "build_vocabulary",
           "language_model_dataset", "masked_language_model_dataset", "read_corpus",
           "read_corpus_batches", "tokens_to_char_ids",
           "write_generated_corpus"]
