"""`TextTokenizer`: raw sentences -> string tokens, in the graph (core ops)."""

import keras
import tensorflow as tf

from elmo_tf.text.tokenizers import get_tokenizer, padded_tokens

_CORE_TOKENIZERS = ("whitespace", "wordpunct")


@keras.saving.register_keras_serializable(package="elmo_tf")
class TextTokenizer(keras.layers.Layer):
    """Sentences `[batch]` -> tokens `[batch, time]`, right-padded with `""` (`time` at least 1,
    so that a batch of empty texts is one column of padding): the first layer of
    the downstream task models, so that they take raw text and tokenize it as the biLM's
    pre-training corpus was (`elmo-tf train --tokenizer`; `elmo_tf.data.corpus.get_tokenizer`).
    Core TensorFlow ops only, so a SavedModel of the task serves raw strings.

    Args:
        tokenizer: `"whitespace"` (pre-tokenized text; the default) or `"wordpunct"`.

    Example:
    >>> TextTokenizer()(tf.constant(["The cat .", "Hi"])).numpy().tolist()
    [[b'The', b'cat', b'.'], [b'Hi', b'', b'']]
    """

    def __init__(self, tokenizer="whitespace", **kwargs):
        super().__init__(**kwargs)
        if tokenizer not in _CORE_TOKENIZERS:
            raise ValueError(f"TextTokenizer's tokenizer must be one of {list(_CORE_TOKENIZERS)} "
                             f"(core TensorFlow ops); got {tokenizer!r}.")
        self.tokenizer = tokenizer
        self._split = get_tokenizer(tokenizer)
        self.supports_jit = False  # string ops do not compile with XLA

    def call(self, texts):
        texts = tf.convert_to_tensor(texts)
        if texts.dtype != tf.string:
            raise TypeError(f"TextTokenizer takes strings (sentences); got {texts.dtype.name}.")
        if texts.shape.rank == 2 and texts.shape[-1] == 1:  # a [batch, 1] column
            texts = texts[:, 0]
        if texts.shape.rank != 1:
            raise ValueError(f"TextTokenizer takes a batch of sentences, shape [batch]; got "
                             f"shape {texts.shape}.")
        return padded_tokens(self._split(texts))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], None)

    def compute_output_spec(self, texts):
        return keras.KerasTensor(self.compute_output_shape(texts.shape), dtype="string")

    def get_config(self):
        return {**super().get_config(), "tokenizer": self.tokenizer}
