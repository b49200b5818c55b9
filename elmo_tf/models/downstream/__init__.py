"""Downstream task models on ELMo representations (`ElmoEmbedding` over any backbone), each
registered by the name `elmo-tf finetune --task` gives it (`task_class`)."""

from elmo_tf.models.downstream.downstream_task import DownstreamTask, task_class, task_names
from elmo_tf.models.downstream.frozen_bilm_head import FrozenBiLMHead
from elmo_tf.models.downstream.sentence_pair_classifier import SentencePairClassifier
from elmo_tf.models.downstream.sequence_tagger import SequenceTagger
from elmo_tf.models.downstream.task_preprocessor import TaskPreprocessor
from elmo_tf.models.downstream.text_classifier import TextClassifier

__all__ = ["DownstreamTask", "FrozenBiLMHead", "SentencePairClassifier", "SequenceTagger",
           "TaskPreprocessor", "TextClassifier", "task_class", "task_names"]
