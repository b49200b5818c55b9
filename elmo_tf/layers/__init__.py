"""ELMo's building blocks as serializable Keras layers."""

from elmo_tf.layers.add_sentence_boundaries import AddSentenceBoundaries
from elmo_tf.layers.bilm_stack import BiLMStack
from elmo_tf.layers.bilstm_stack import BiLSTMStack
from elmo_tf.layers.char_cnn import CharCNN
from elmo_tf.layers.highway import Highway
from elmo_tf.layers.philox_dropout import PhiloxDropout
from elmo_tf.layers.projected_lstm import ProjectedLSTM
from elmo_tf.layers.remove_sentence_boundaries import RemoveSentenceBoundaries
from elmo_tf.layers.scalar_mix import ScalarMix
from elmo_tf.layers.token_encoder import TokenEncoder
from elmo_tf.layers.tokens_to_char_ids import TokensToCharIds
# Moved to elmo_tf.ops.softmax; kept so earlier code imports (a README named this module).
from elmo_tf.ops import softmax as sampled_softmax

__all__ = [
    "AddSentenceBoundaries", "BiLMStack", "BiLSTMStack", "CharCNN", "Highway", "PhiloxDropout",
    "ProjectedLSTM", "RemoveSentenceBoundaries", "ScalarMix", "TokenEncoder", "TokensToCharIds",
    "sampled_softmax",
]
