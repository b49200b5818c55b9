"""Downstream task models on ELMo representations (`ElmoEmbedding` over any backbone)."""

from elmo_tf.models.downstream.sentence_pair_classifier import SentencePairClassifier
from elmo_tf.models.downstream.sequence_tagger import SequenceTagger
from elmo_tf.models.downstream.text_classifier import TextClassifier

__all__ = ["SentencePairClassifier", "SequenceTagger", "TextClassifier"]
