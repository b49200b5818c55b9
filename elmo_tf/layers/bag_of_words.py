"""`BagOfWords`: word ids -> the mean of task-trained word embeddings."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="elmo_tf")
class BagOfWords(keras.layers.Layer):
    """Word ids `[batch, time]` (`HashedWords`'s: words hashed into `1 .. buckets - 1`,
    padding 0) -> `[batch, dim]`: the mean of one trained embedding row per real word (zeros
    for a sentence with none); padding looks up row 0 and is weighted 0. Numeric only, so it
    compiles with XLA (the hashing, a string op, is `HashedWords`'s, in the input pipeline).

    The task models' context-free word features, learned on the task's labels alone: what the
    ELMo paper's task models concatenate ELMo with (their `x_k`, GloVe there), and the
    bag-of-words half of a strong small-data sentence classifier (`TextClassifier`'s
    `word_embedding_dim`). Words are hashed as written (no lowercasing), as the biLM reads them.

    Args:
        dim: the embedding's size.
        buckets: rows of the embedding, `HashedWords`'s `buckets` (2**16: a few collisions in a
            task vocabulary of tens of thousands of words).

    Example:
    >>> ids = HashedWords()(tf.constant([["a", "fine", "film"], ["dull", "", ""]]))
    >>> BagOfWords(dim=8)(ids).shape
    TensorShape([2, 8])
    """

    def __init__(self, dim, buckets=2 ** 16, **kwargs):
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

    def call(self, ids):
        ids = tf.convert_to_tensor(ids)
        if not ids.dtype.is_integer:
            raise TypeError(f"BagOfWords takes integer word ids [batch, time] (HashedWords's); "
                            f"got {ids.dtype.name}.")
        if ids.shape.rank != 2:
            raise ValueError(f"BagOfWords takes word ids [batch, time]; got shape {ids.shape}.")
        real = tf.not_equal(ids, 0)
        vectors = self.embedding(ids)
        weights = tf.cast(real, vectors.dtype)[:, :, None]
        count = tf.maximum(tf.reduce_sum(weights, axis=1), tf.ones([], vectors.dtype))
        return tf.reduce_sum(vectors * weights, axis=1) / count

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.dim)

    def get_config(self):
        return {**super().get_config(), "dim": self.dim, "buckets": self.buckets}
