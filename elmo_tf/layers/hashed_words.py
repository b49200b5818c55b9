"""`HashedWords`: string tokens -> word ids by hashing (no vocabulary), padding -> 0."""

import keras
import tensorflow as tf


BUCKETS = 2 ** 16  # a few collisions in a task vocabulary of tens of thousands of words


def hashed_word_ids(tokens, buckets=BUCKETS):
    """String tokens `[batch, time]` (padding `""`) -> int32 ids: each word hashed as written
    into `1 .. buckets - 1`, padding 0."""
    ids = tf.strings.to_hash_bucket_fast(tokens, buckets - 1) + 1
    return tf.cast(tf.where(tf.not_equal(tokens, ""), ids, 0), tf.int32)


@keras.saving.register_keras_serializable(package="elmo_tf")
class HashedWords(keras.layers.Layer):
    """String tokens `[batch, time]`, right-padded with `""` -> int32 word ids `[batch, time]`:
    each word hashed as written (`tf.strings.to_hash_bucket_fast`, a core op, so a SavedModel
    serves it) into `1 .. buckets - 1`, padding 0. What `BagOfWords` reads; a string op, so it
    runs in the input pipeline (a task model's preprocessor), not in an XLA-compiled step.

    Args:
        buckets: ids `0 .. buckets - 1` (the size of the table that reads them).

    Example:
    >>> HashedWords(buckets=8)(tf.constant([["a", "film"], ["dull", ""]])).numpy()[1, 1]
    0
    """

    def __init__(self, buckets=BUCKETS, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 2:
            raise ValueError(f"HashedWords's buckets must be an integer >= 2; got {buckets!r}.")
        self.buckets = buckets
        self.supports_jit = False  # string ops do not compile with XLA
        self.built = True  # no weights (see CharIdsTokenizer)

    def call(self, tokens):
        tokens = tf.convert_to_tensor(tokens)
        if tokens.dtype != tf.string:
            raise TypeError(f"HashedWords takes string tokens [batch, time]; got "
                            f"{tokens.dtype.name}.")
        if tokens.shape.rank != 2:
            raise ValueError(f"HashedWords takes string tokens [batch, time]; got shape "
                             f"{tokens.shape}.")
        return hashed_word_ids(tokens, self.buckets)

    def compute_output_spec(self, tokens):
        return keras.KerasTensor(tokens.shape, dtype="int32")

    def get_config(self):
        return {**super().get_config(), "buckets": self.buckets}
