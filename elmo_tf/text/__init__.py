"""Text, the ground floor: ELMo's char ids, word vocabularies and tokenizers (nothing of
elmo-tf's above it)."""

from elmo_tf.text.char_ids import tokens_to_char_ids
from elmo_tf.text.tokenizers import TOKENIZERS, get_tokenizer
from elmo_tf.text.vocabulary import Vocabulary

__all__ = ["TOKENIZERS", "Vocabulary", "get_tokenizer", "tokens_to_char_ids"]
