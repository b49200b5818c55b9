"""`ElmoTokenizer`: sentences -> the char ids ELMo's biLM reads, as a KerasHub tokenizer."""

import keras

from elmo_tf.models.char_ids_tokenizer import CharIdsTokenizer
from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoTokenizer(CharIdsTokenizer):
    """`CharIdsTokenizer` for `ElmoBackbone`: what `keras_hub.tokenizers.Tokenizer.from_preset`
    returns for an ELMo preset (`elmo-tf train`'s and `init`'s model directories).

    Example:
    >>> tokenizer = ElmoTokenizer("whitespace", max_characters_per_token=50)
    >>> tokenizer(["The cat sat ."]).shape
    TensorShape([1, 4, 50])
    """

    backbone_cls = ElmoBackbone
