"""`BagOfWords`: word ids (or string tokens) -> the mean of task-trained word embeddings."""

import keras
import tensorflow as tf

from elmo_tf.layers.hashed_words import BUCKETS, hashed_word_ids
from elmo_tf.text.char_ids import is_strings


@keras.saving.register_keras_serializable(package="elmo_tf")
class BagOfWords(keras.layers.Layer):
    """Word ids `[batch, time]` (`HashedWords`'s: words hashed into `1 .. buckets - 1`,
    padding 0), or the string tokens themselves (right-padded with `""`, hashed here as
    `HashedWords` does) -> `[batch, dim]`: the mean of one trained embedding row per real word
    (zeros for a sentence with none); padding looks up row 0 and is weighted 0. On ids it is
    numeric only, so it compiles with XLA (the task models hash in their preprocessor); called
    on strings once, it says it does not (`supports_jit`).

    Args:
        dim: the embedding's size.
        buckets: rows of the embedding, `HashedWords`'s `buckets` (2**16: a few collisions in a
            task vocabulary of tens of thousands of words).

    Example:
    >>> ids = HashedWords()(tf.constant([["a", "fine", "film"], ["dull", "", ""]]))
    >>> BagOfWords(dim=8)(ids).shape
    TensorShape([2, 8])
    """

    def __init__(self, dim, buckets=BUCKETS, **kwargs):
        super().__init__(**kwargs)
        for name, value, least in (("dim", dim, 1), ("buckets", buckets, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"BagOfWords's {name} must be an integer >= {least}; got "
                                 f"{value!r}.")
        self.dim = dim
        self.buckets = buckets
        self.embedding = keras.layers.Embedding(
            buckets, dim, embeddings_initializer=keras.initializers.RandomUniform(-0.05, 0.05),
            dtype=self.dtype_policy, name="embedding")

    def build(self, input_shape):
        self.embedding.build((None, None))
        self.built = True

    def __call__(self, inputs, *args, **kwargs):
        # Strings are hashed here, a string op XLA cannot compile; ids compile.
        self.supports_jit = self.supports_jit and not is_strings(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, ids):
        ids = tf.convert_to_tensor(ids)
        if ids.shape.rank != 2:
            raise ValueError(f"BagOfWords takes word ids or string tokens [batch, time]; got "
                             f"shape {ids.shape}.")
        if ids.dtype == tf.string:
            ids = hashed_word_ids(ids, self.buckets)
        elif not ids.dtype.is_integer:
            raise TypeError(f"BagOfWords takes integer word ids (HashedWords's) or string "
                            f"tokens [batch, time]; got {ids.dtype.name}.")
        real = tf.not_equal(ids, 0)
        vectors = self.embedding(ids)
        weights = tf.cast(real, vectors.dtype)[:, :, None]
        count = tf.maximum(tf.reduce_sum(weights, axis=1), tf.ones([], vectors.dtype))
        return tf.reduce_sum(vectors * weights, axis=1) / count

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.dim)

    def get_config(self):
        return {**super().get_config(), "dim": self.dim, "buckets": self.buckets}
