"""ELMo's model family: its configuration and presets, the biLM backbone, the released weight
files, the biLM pre-training task, and its entry in the family registry."""

from elmo_tf.models.elmo.elmo_family import ElmoFamily
from elmo_tf.models.family import register_family

register_family(ElmoFamily())
