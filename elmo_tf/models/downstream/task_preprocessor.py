"""`TaskPreprocessor`: raw text -> a downstream task's features, as a KerasHub preprocessor."""

import keras
import keras_hub
import tensorflow as tf

from elmo_tf.keras_compat import preset_has_file
from elmo_tf.layers.hashed_words import HashedWords
from elmo_tf.models.char_ids_tokenizer import CharIdsTokenizer
from elmo_tf.text.char_ids import tokens_to_char_ids


@keras.saving.register_keras_serializable(package="elmo_tf")
class TaskPreprocessor(keras_hub.models.Preprocessor):
    """A downstream task's string ops, for its input pipeline (a
    `keras_hub.models.Preprocessor`: `Task.fit`, `predict` and `evaluate` map it over the data;
    mappable over `tf.data` by hand): raw texts in, the task model's features out, every one
    int32 and padded with 0, so that the model itself compiles with XLA.

    * one input (`input_names=("text",)`): `{"char_ids": [batch, time, chars]}`, with
      `word_ids` also `{"word_ids": [batch, time]}` (each token hashed: `HashedWords`);
    * several inputs (a pair's `text_a`, `text_b`): `{"<name>_char_ids": ...}` for each.

    Args:
        tokenizer: a `CharIdsTokenizer` (the backbone family's: `ElmoTokenizer`, ...): how a
            text becomes tokens and char ids.
        input_names: the task's text inputs, in order; one, or a dict's keys.
        word_ids: also the hashed word ids of a one-input task's tokens.

    Example:
    >>> preprocessor = TaskPreprocessor(ElmoTokenizer("wordpunct"), word_ids=True)
    >>> features = preprocessor(tf.constant(["A fine film.", "Dull."]))
    >>> features["char_ids"].shape, features["word_ids"].shape
    (TensorShape([2, 4, 50]), TensorShape([2, 4]))
    """

    def __init__(self, tokenizer, input_names=("text",), word_ids=False, **kwargs):
        super().__init__(**kwargs)
        input_names = tuple(input_names)
        if not input_names or not all(isinstance(n, str) and n for n in input_names):
            raise ValueError(f"input_names must be one or more names; got {input_names!r}.")
        if word_ids and len(input_names) != 1:
            raise ValueError("word_ids are a one-input task's (a sentence classifier's); got "
                             f"inputs {list(input_names)}.")
        self.tokenizer = tokenizer
        self.input_names = input_names
        self.word_ids = bool(word_ids)
        self.hash_words = HashedWords(name="word_ids") if word_ids else None
        self.built = True  # no weights (see CharIdsTokenizer)

    @classmethod
    def _add_missing_kwargs(cls, loader, kwargs):
        """KerasHub's loader of a task from a biLM's preset (`preprocessor_cls`; no
        preprocessor.json): the preset's tokenizer (tokenizer.json, how its corpus was split),
        or, from a backbone's preset without one, whitespace."""
        if "tokenizer" not in kwargs:
            kwargs["tokenizer"] = (
                loader.load_tokenizer(CharIdsTokenizer)
                if preset_has_file(loader, "tokenizer.json")
                else CharIdsTokenizer())
        return kwargs

    def build(self, input_shape=None):
        self.built = True  # string ops only: nothing to build

    def feature_names(self):
        """The names of the features `call` returns, in order."""
        if len(self.input_names) > 1:
            return [f"{name}_char_ids" for name in self.input_names]
        return ["char_ids"] + (["word_ids"] if self.word_ids else [])

    def feature_inputs(self):
        """`{name: keras.Input}` of the features: the task model's inputs."""
        chars = self.tokenizer.max_characters_per_token
        return {name: keras.Input(shape=(None,) if name == "word_ids" else (None, chars),
                                  dtype="int32", name=name) for name in self.feature_names()}

    def tokens(self, texts):
        """The string tokens `[batch, time]` of `texts` `[batch]` (padded with `""`)."""
        return self.tokenizer.tokens(texts)

    def call(self, x, y=None, sample_weight=None):
        if not isinstance(x, dict) and len(self.input_names) > 1:
            raise ValueError(f"{type(self).__name__} reads a dict of texts "
                             f"{list(self.input_names)}; got one {type(x).__name__}.")
        texts = x if isinstance(x, dict) else {self.input_names[0]: x}
        missing = [name for name in self.input_names if name not in texts]
        if missing:
            raise ValueError(f"{type(self).__name__} reads the texts {list(self.input_names)}; "
                             f"got {sorted(texts)}.")
        features = {}
        for name in self.input_names:
            text = tf.convert_to_tensor(texts[name])
            if text.shape.rank == 2 and text.shape[-1] == 1:  # a [batch, 1] column
                text = text[:, 0]
            tokens = self.tokens(text)
            char_ids = tokens_to_char_ids(tokens, self.tokenizer.max_characters_per_token)
            if len(self.input_names) > 1:
                features[f"{name}_char_ids"] = char_ids
                continue
            features["char_ids"] = char_ids
            if self.hash_words is not None:
                features["word_ids"] = self.hash_words(tokens)
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

    def get_config(self):
        return {**super().get_config(), "input_names": list(self.input_names),
                "word_ids": self.word_ids}
