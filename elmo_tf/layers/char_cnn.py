"""`CharCNN`: ELMo's character convolutions (embedding, one conv per width, max-pool, activation)."""

import math

import keras
import tensorflow as tf

from elmo_tf.ops.chunking import compute_device_type, map_in_chunks
from elmo_tf.layers.initializers import initializer

# Memory for the intermediate tensors of one chunk of tokens, by device. On a CPU a chunk that
# stays in cache is fastest and keeps the peak memory of inference small; on a GPU few large
# chunks keep the device busy (small fixed chunks ran hundreds of small kernels in a row).
# Figures: docs/benchmarks.md, "The char CNN's chunks".
CHUNK_BYTES = {"CPU": 14 << 20, "GPU": 1 << 30}


@keras.saving.register_keras_serializable(package="elmo_tf")
class CharCNN(keras.layers.Layer):
    """Char ids `[batch, time, chars]` -> token features `[batch, time, sum(n_filters)]`.

    bilm-tf's `CNN` block (`docs/conventions.md` §4.1): a char embedding whose id 0
    is a fixed zero row (the weight holds the 261 learned rows, as `char_embed` in the released
    hdf5), then for each `(width, n_filters)` a VALID convolution over the char axis, the max over
    positions, and the activation. Within a token nothing is masked: the padding char has a
    learned embedding; an all-zero (padding) token gives a deterministic, bias-driven vector.

    Args:
        filters: list of `[width, n_filters]` (`char_cnn.filters` of options.json).
        embedding_dim: char embedding size (`char_cnn.embedding.dim`).
        activation: `"relu"` or `"tanh"` (`char_cnn.activation`).
        n_characters: char vocabulary including the padding id 0 (262 at inference).
        initialize: False leaves the weights uninitialised, for weights about to be loaded
            (`initializers.initializer`; not part of the config).

    Example:
    >>> cnn = CharCNN(filters=[[1, 4], [2, 8]], embedding_dim=4)
    >>> cnn(tokens_to_char_ids([["Hello", "world"]])).shape
    TensorShape([1, 2, 12])
    """

    ACTIVATIONS = ("relu", "tanh")

    def __init__(self, filters, embedding_dim, activation="relu", n_characters=262,
                 initialize=True, **kwargs):
        super().__init__(**kwargs)
        self.initialize_weights = bool(initialize)
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"activation must be one of {self.ACTIVATIONS}; got {activation!r}.")
        self.filters = [[int(w), int(n)] for w, n in filters]
        self.embedding_dim = int(embedding_dim)
        self.activation = activation
        self.n_characters = int(n_characters)
        self.output_dim = sum(n for _, n in self.filters)

    def build(self, input_shape):
        chars = input_shape[-1]
        for width, _ in self.filters:
            if chars is not None and width > chars:
                raise ValueError(f"filter width {width} exceeds the {chars} chars per token.")
        # bilm-tf's training initialisers: U(-1, 1) for chars; Kim et al.'s U(+-0.05) for ReLU
        # convolutions, N(0, 1/sqrt(width * dim)) for tanh.
        self.char_embed = self.add_weight(
            name="char_embed", shape=(self.n_characters - 1, self.embedding_dim),
            initializer=initializer(keras.initializers.RandomUniform(-1.0, 1.0),
                                    self.initialize_weights),
            autocast=False)  # read in its own dtype: see `call`
        self.kernels, self.biases = [], []
        for i, (width, n_filters) in enumerate(self.filters):
            if self.activation == "relu":
                init = keras.initializers.RandomUniform(-0.05, 0.05)
            else:
                init = keras.initializers.RandomNormal(
                    stddev=math.sqrt(1.0 / (width * self.embedding_dim)))
            self.kernels.append(self.add_weight(
                name=f"W_cnn_{i}", shape=(width, self.embedding_dim, n_filters),
                initializer=initializer(init, self.initialize_weights)))
            self.biases.append(self.add_weight(
                name=f"b_cnn_{i}", shape=(n_filters,), initializer="zeros"))

    def call(self, char_ids):
        dtype = self.compute_dtype
        # The lookup reads the variable's own dtype and casts after it (as Keras's Embedding
        # does): the gradient then sums each char's rows in float32. Under mixed bfloat16 that
        # sum would be a bfloat16 scatter-add, which GPUs run as a compare-and-swap loop.
        table = tf.concat([tf.zeros([1, self.embedding_dim], self.char_embed.dtype),
                           self.char_embed], axis=0)
        kernels = [tf.cast(k, dtype) for k in self.kernels]
        biases = [tf.cast(b, dtype) for b in self.biases]
        shape = tf.shape(char_ids)
        n_chars = char_ids.shape[-1]
        ids = tf.reshape(char_ids, [-1, n_chars])

        def encode(chunk_ids):
            chars = tf.cast(tf.gather(table, chunk_ids), dtype)  # [chunk, n_chars, dim]
            pooled = []
            for (width, n_filters), kernel, bias in zip(self.filters, kernels, biases):
                # VALID cross-correlation as one matmul over [position, width * dim] patches.
                positions = n_chars - width + 1
                patches = tf.concat([chars[:, i:i + positions] for i in range(width)], axis=-1)
                conv = tf.matmul(tf.reshape(patches, [-1, width * self.embedding_dim]),
                                 tf.reshape(kernel, [-1, n_filters]))
                conv = tf.reshape(conv, [-1, positions, n_filters])
                # max(conv + b) == max(conv) + b exactly: the bias is per filter.
                pooled.append(tf.reduce_max(conv, axis=1) + bias)
            features = tf.concat(pooled, axis=-1)
            return tf.nn.relu(features) if self.activation == "relu" else tf.tanh(features)

        # Tokens go through in chunks so that the convolutions' intermediate tensors (about
        # 450 kB per token for the released CNN in float32) never exist for a whole batch at
        # once: the device's memory budget decides the chunk (see `CHUNK_BYTES`).
        tokens_per_chunk = self.tokens_per_chunk(compute_device_type(), n_chars)
        features = map_in_chunks(encode, ids, tokens_per_chunk,
                                 tf.TensorSpec([None, self.output_dim], dtype))
        return tf.reshape(features, tf.concat([shape[:-1], [self.output_dim]], axis=0))

    def tokens_per_chunk(self, device_type, n_chars=50):
        """Tokens encoded together on `device_type` (`"CPU"` or `"GPU"`): as many as
        `CHUNK_BYTES[device_type]` holds of their intermediate tensors (char embeddings,
        convolution patches and outputs), at least one."""
        per_token = n_chars * self.embedding_dim + sum(
            (n_chars - width + 1) * (width * self.embedding_dim + n_filters)
            for width, n_filters in self.filters)
        itemsize = tf.as_dtype(self.compute_dtype).size
        return max(1, CHUNK_BYTES[device_type] // (per_token * itemsize))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(filters=self.filters, embedding_dim=self.embedding_dim,
                      activation=self.activation, n_characters=self.n_characters)
        return config
