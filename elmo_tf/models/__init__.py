"""Models: the `Backbone` contract (a KerasHub backbone), the KerasHub tokenizer every family's
subclasses (`char_ids_tokenizer.py`), the `Task` base and the family registry (`family.py`), one
folder per model family (`elmo/`, `masked_elmo/`: each registers itself on import), the
downstream embedding layers that work on any backbone, and the downstream task models
(`downstream/`)."""

from elmo_tf.models import elmo, masked_elmo  # noqa: F401  (the families register themselves)
from elmo_tf.models.backbone import Backbone
from elmo_tf.models.downstream import (
    SentencePairClassifier,
    SequenceTagger,
    TaskPreprocessor,
    TextClassifier,
)
from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.elmo.elmo_language_model import ElmoLanguageModel
from elmo_tf.models.elmo.elmo_tokenizer import ElmoTokenizer
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.models.load_backbone import load_backbone
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone
from elmo_tf.models.masked_elmo.masked_elmo_config import MaskedElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_language_model import MaskedElmoLanguageModel
from elmo_tf.models.masked_elmo.masked_elmo_tokenizer import MaskedElmoTokenizer
from elmo_tf.models.task import Task

__all__ = ["Backbone", "ElmoBackbone", "ElmoConfig", "ElmoEmbedding", "ElmoLanguageModel",
           "ElmoTokenizer", "MaskedElmoBackbone", "MaskedElmoConfig", "MaskedElmoLanguageModel",
           "MaskedElmoTokenizer",
           "SentencePairClassifier", "SequenceTagger", "Task", "TaskPreprocessor",
           "TextClassifier",
           "load_backbone"]
