"""`MaskedElmoTokenizer`: sentences -> the char ids Masked ELMo reads, as a KerasHub tokenizer."""

import keras

from elmo_tf.models.char_ids_tokenizer import CharIdsTokenizer
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedElmoTokenizer(CharIdsTokenizer):
    """`CharIdsTokenizer` for `MaskedElmoBackbone`: what
    `keras_hub.tokenizers.Tokenizer.from_preset` returns for a Masked ELMo preset.

    Example:
    >>> tokenizer = MaskedElmoTokenizer("whitespace", max_characters_per_token=20)
    >>> tokenizer(["The cat sat ."]).shape
    TensorShape([1, 4, 20])
    """

    backbone_cls = MaskedElmoBackbone
