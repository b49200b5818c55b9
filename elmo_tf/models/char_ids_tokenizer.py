"""`CharIdsTokenizer`: sentences -> ELMo char ids, as a KerasHub tokenizer."""

import os

import keras
import keras_hub
import tensorflow as tf

from elmo_tf.text.char_ids import MAX_CHARACTERS_PER_TOKEN, tokens_to_char_ids
from elmo_tf.text.tokenizers import TOKENIZERS, get_tokenizer, padded_tokens

# Byte b as a one-byte string, at index b: char ids back to text (`detokenize`). A list, not a
# tensor: a tensor made on import would start TensorFlow's devices before a strategy can
# split them.
_SINGLE_BYTES = [bytes([b]) for b in range(256)]


@keras.saving.register_keras_serializable(package="elmo_tf")
class CharIdsTokenizer(keras_hub.tokenizers.Tokenizer):
    """Raw sentences `[batch]` -> int32 char ids `[batch, time, max_characters_per_token]`: what
    every elmo-tf backbone reads, as a KerasHub tokenizer (a `keras_hub.tokenizers.Tokenizer`,
    mappable over `tf.data`, saved in presets). Each family names its backbone in a subclass
    (`ElmoTokenizer`, `MaskedElmoTokenizer`: `backbone_cls`), so that KerasHub's
    `keras_hub.tokenizers.Tokenizer.from_preset(dir)` finds the right one.

    Sentences are split into tokens as the biLM's corpus was (`elmo-tf train --tokenizer`:
    `elmo_tf.text.tokenizers.get_tokenizer`), right-padded with `""` (`time` at least 1), and each
    token becomes ELMo's char ids (`elmo_tf.tokens_to_char_ids`: the UTF-8 bytes between the
    begin- and end-of-word marks, cut at `max_characters_per_token - 2` bytes; padding tokens
    all zeros). No sentence boundaries are added: the backbone adds them.

    Args:
        tokenizer: `"whitespace"` (pre-tokenized text; the default), `"wordpunct"`, or
            `"unicode_script"` (tensorflow-text).
        max_characters_per_token: the backbone's (50 in every released model).

    Example:
    >>> tokenizer = keras_hub.tokenizers.Tokenizer.from_preset("runs/tiny")  # ElmoTokenizer
    >>> backbone = keras_hub.models.Backbone.from_preset("runs/tiny")
    >>> backbone(tokenizer(["The cat sat .", "Hi"]))["layers"].shape
    TensorShape([2, 3, 4, 32])
    >>> tokenizer.detokenize(tokenizer(["The  cat sat ."]))
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'The cat sat .'], dtype=object)>
    """

    def __init__(self, tokenizer="whitespace", max_characters_per_token=MAX_CHARACTERS_PER_TOKEN,
                 **kwargs):
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"{type(self).__name__}'s tokenizer must be one of "
                             f"{list(TOKENIZERS)}; got {tokenizer!r}.")
        if not isinstance(max_characters_per_token, int) or max_characters_per_token < 4:
            raise ValueError("max_characters_per_token must be an int of at least 4 (the "
                             "word marks, a byte and the padding); got "
                             f"{max_characters_per_token!r}.")
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.max_characters_per_token = max_characters_per_token
        self._split = get_tokenizer(tokenizer)
        # No weights: built from the start. Unbuilt (KerasHub's preprocessing layers build
        # when called, and a preprocessor calls its tokenizer's `tokenize`), it kept every task
        # holding it "unbuilt", and Keras then traced the whole model again before each `fit`,
        # `evaluate` and `train_on_batch` call (a task's train_on_batch took 10x as long).
        self.built = True

    def tokenize(self, inputs):
        """Sentences (a string, or a `[batch]` of them) -> char ids `[time, chars]` (or
        `[batch, time, chars]`)."""
        texts = tf.convert_to_tensor(inputs)
        char_ids = tokens_to_char_ids(self.tokens(texts), self.max_characters_per_token)
        return char_ids[0] if texts.shape.rank == 0 else char_ids

    def tokens(self, inputs):
        """Sentences (a string, or a `[batch]` of them) -> their string tokens `[batch, time]`,
        right-padded with `""` (`time` at least 1): what `tokenize` turns into char ids, for
        what reads the words themselves (a task's hashed word ids, a tagger's tags)."""
        texts = tf.convert_to_tensor(inputs)
        if texts.dtype != tf.string:
            raise TypeError(f"{type(self).__name__} takes sentences (strings); got "
                            f"{texts.dtype.name}.")
        if texts.shape.rank not in (0, 1):
            raise ValueError(f"{type(self).__name__} takes a sentence or a [batch] of "
                             f"sentences; got shape {texts.shape}.")
        return padded_tokens(self._split(tf.reshape(texts, [-1])))

    def detokenize(self, inputs):
        """Char ids `[batch, time, chars]` -> sentences `[batch]` (`[time, chars]` -> one): the
        tokens' bytes joined by single spaces (a token cut at `max_characters_per_token - 2`
        bytes stays cut)."""
        char_ids = tf.convert_to_tensor(inputs, tf.int32)
        one = char_ids.shape.rank == 2
        if one:
            char_ids = char_ids[tf.newaxis]
        if char_ids.shape.rank != 3:
            raise ValueError(f"detokenize takes char ids [batch, time, chars]; got shape "
                             f"{char_ids.shape}.")
        byte_values = char_ids - 1  # ids are bytes + 1, 0 is padding
        is_byte = (char_ids > 0) & (byte_values < 256)
        single_bytes = tf.gather(_SINGLE_BYTES, tf.clip_by_value(byte_values, 0, 255))
        tokens = tf.strings.reduce_join(tf.where(is_byte, single_bytes, ""), axis=-1)
        words = tf.ragged.boolean_mask(tokens, tf.strings.length(tokens) > 0)
        sentences = tf.strings.reduce_join(words, axis=-1, separator=" ")
        return sentences[0] if one else sentences

    def save_to_preset(self, preset_dir):
        """Writes `tokenizer.json` into `preset_dir` (KerasHub's writer), whole or not at all.

        Example:
        >>> tokenizer.save_to_preset("runs/tiny")
        """
        from elmo_tf.files import write_files_atomically

        write_files_atomically(preset_dir, lambda staging: super(
            CharIdsTokenizer, self).save_to_preset(staging))

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """KerasHub's `from_preset`, taking a `pathlib.Path` too.

        Example:
        >>> ElmoTokenizer.from_preset(pathlib.Path("runs/tiny"))
        """
        return super().from_preset(os.fspath(preset), **kwargs)

    def save_assets(self, dir_path):
        """No assets: the tokenizer is its config (KerasHub's preset writer calls this)."""

    def load_preset_assets(self, preset):
        """No assets to load (see `save_assets`)."""

    def get_config(self):
        return {**super().get_config(), "tokenizer": self.tokenizer,
                "max_characters_per_token": self.max_characters_per_token}
