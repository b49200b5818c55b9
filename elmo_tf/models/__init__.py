"""ELMo models: the configuration, the biLM backbone, its pre-training task and the downstream
embedding layer."""

from elmo_tf.models.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo_config import ElmoConfig
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.models.elmo_language_model import ElmoLanguageModel

__all__ = ["ElmoBackbone", "ElmoConfig", "ElmoEmbedding", "ElmoLanguageModel"]
