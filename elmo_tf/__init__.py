"""elmo-tf: ELMo and Masked ELMo in TensorFlow 2 / Keras 3.

Example:
>>> import elmo_tf
>>> elmo = elmo_tf.ElmoEmbedding.from_allennlp("options.json", "weights.hdf5")
>>> vectors = elmo([["The", "cat", "sat", "."], ["Hello", "", "", ""]])  # [2, 4, 2P]
"""

__version__ = "0.3.0"

# Before anything here imports TensorFlow: its XLA flags are read when it first compiles.
from elmo_tf import xla_cache

xla_cache.configure()

from elmo_tf.text.char_ids import tokens_to_char_ids
from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone
from elmo_tf.models.masked_elmo.masked_elmo_config import MaskedElmoConfig
from elmo_tf.models.saved_model_embedding import SavedModelEmbedding  # registered for .keras

__all__ = ["ElmoBackbone", "ElmoConfig", "ElmoEmbedding", "MaskedElmoBackbone",
           "MaskedElmoConfig", "SavedModelEmbedding", "tokens_to_char_ids", "xla_cache",
           "__version__"]
