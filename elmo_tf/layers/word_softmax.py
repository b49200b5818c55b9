"""`WordSoftmax`: a language model's output layer over a word vocabulary, sampled or full."""

import math

import keras
import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.ops.chunking import map_in_chunks, map_leading_rows
from elmo_tf.ops.random import stateless_uniform
from elmo_tf.ops.softmax import (
    LEADING_ROW_CHUNKS,
    MAX_LOGITS_PER_CHUNK,
    full_softmax_nll,
    sampled_softmax_nll,
)


@keras.saving.register_keras_serializable(package="elmo_tf")
class WordSoftmax(keras.layers.Layer):
    """Hidden states `[n, P]` and target word ids `[n]` -> each row's negative log-likelihood.

    bilm-tf's softmax (`docs/conventions.md` §7): `kernel` `[V, P]` and `bias`
    `[V]`, not tied to the input embeddings. Its dtype is float32 unless another is given (a
    mixed global policy does not apply): a bfloat16 model's loss stays float32. In training the
    loss is the sampled softmax's when the vocabulary is larger than `num_negatives`:
    `num_negatives` log-uniform candidates per call (so the vocabulary must be sorted by
    decreasing frequency, as `elmo_tf.data.build_vocabulary` writes it), accidental hits
    removed, drawn as TF's sampler draws them with ops XLA compiles
    (`elmo_tf.ops.softmax`); its kernel gradient is row-sparse. Otherwise, and always in
    evaluation, the full softmax, computed a bounded number of rows at a time.

    Args:
        vocabulary_size: V.
        num_negatives: sampled-softmax candidates per call (bilm-tf: 8192).

    Call arguments:
        outputs: float `[n, P]` (`[n, stop - start]` with `columns`).
        targets: int `[n]` in `[0, V)`.
        training: Python bool: the sampled estimate (if `samples`) or the full softmax.
        seed: int32 `[2]`, the candidates' stateless seed; drawn per call when None
            (`draw_seed`: calls given the same seed share their candidates).
        columns: `(start, stop)`: score against those columns of the kernel only, as rows
            `outputs` padded with zeros to `[n, P]` would be, without the zeros' work.
        count: int32 scalar: only the first `count` rows need a score, the others' NLLs are
            0: with static shapes (XLA), the work follows `count` rather than n (a loss on a
            few positions, sorted first; `elmo_tf.ops.softmax.LEADING_ROW_CHUNKS`).

    Example:
    >>> softmax = WordSoftmax(vocabulary_size=50_000, num_negatives=8192)
    >>> nll = softmax(tf.random.normal([6, 16]), tf.constant([3, 9, 4, 1, 2, 7]), training=True)
    """

    def __init__(self, vocabulary_size, num_negatives=8192, **kwargs):
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = "float32"  # not a mixed global policy: the loss stays float32
        super().__init__(**kwargs)
        if isinstance(vocabulary_size, bool) or int(vocabulary_size) != vocabulary_size \
                or vocabulary_size < 4:
            raise ValueError(f"vocabulary_size must be an integer >= 4 (the specials and a "
                             f"word); got {vocabulary_size!r}.")
        check_positive_ints(num_negatives=num_negatives)
        self.vocabulary_size = int(vocabulary_size)
        self.num_negatives = int(num_negatives)
        self._loaded_by_owner = False

    @property
    def samples(self):
        """Whether training uses the sampled softmax (V > num_negatives)."""
        return self.vocabulary_size > self.num_negatives

    def build(self, input_shape):
        dim = input_shape[-1]
        self.kernel = self.add_weight(
            name="softmax_kernel", shape=(self.vocabulary_size, dim), dtype="float32",
            initializer=keras.initializers.RandomNormal(stddev=1.0 / math.sqrt(dim)))
        self.bias = self.add_weight(name="softmax_bias", shape=(self.vocabulary_size,),
                                    dtype="float32", initializer="zeros")

    def call(self, outputs, targets, training=False, seed=None, columns=None, count=None):
        outputs = tf.cast(outputs, tf.float32)
        if training and self.samples:
            seed = self.draw_seed() if seed is None else seed
            return sampled_softmax_nll(self.kernel, self.bias, outputs, targets,
                                       self.num_negatives, seed, columns, count)
        return full_softmax_nll(self.kernel, self.bias, outputs, targets, columns, count)

    def nll_and_samples(self, outputs, targets, training=False, seed=None, drawable=None,
                        count=None):
        """Each row's NLL (as `call`) and a word drawn from the row's full softmax: a
        generator's loss and its samples (`MaskedElmoLanguageModel`'s replaced-token
        detection).

        The loss is `call`'s (sampled in training with `samples`); the words are drawn from the
        full softmax (`draw`), whatever the loss's estimate: a word drawn from the sampled
        softmax's candidates and target would favour the target (its column is always there).

        Args:
            outputs: float `[n, P]`.
            targets: int `[n]` in `[0, V)`.
            training: Python bool, as `call`'s.
            seed: int32 `[2]`: the candidates' seed (drawn when None); the draw's is folded
                from it.
            drawable: bool `[V]`, the words that may be drawn (all when None).
            count: int32 scalar: only the first `count` rows are scored and draw a word
                (static shapes, as `call`'s `count`); the others' NLLs and words are 0.

        Returns:
            `(nll, words)`: float32 `[n]` and int32 `[n]`.
        """
        seed = self.draw_seed() if seed is None else seed
        return (self(outputs, targets, training=training, seed=seed, count=count),
                self.draw(outputs, tf.random.experimental.stateless_fold_in(seed, 1),
                          drawable, count))

    def draw(self, outputs, seed, drawable=None, count=None):
        """One word per row of `outputs` `[n, P]` drawn from its full softmax (the Gumbel-max
        trick, no gradient), a bounded number of rows at a time as the full softmax's loss;
        `seed`: int32 `[2]`; `drawable`: bool `[V]`, the words that may be drawn (all when
        None); `count`: only the first `count` rows draw, in as many of `LEADING_ROW_CHUNKS`
        equal chunks as they fill (`map_leading_rows`), the others' words are 0. Returns
        int32 `[n]`."""
        kernel = tf.stop_gradient(tf.convert_to_tensor(self.kernel))
        bias = tf.stop_gradient(tf.convert_to_tensor(self.bias))
        if drawable is not None:
            bias = tf.where(drawable, bias, -math.inf)
        outputs = tf.stop_gradient(tf.cast(outputs, tf.float32))

        def chunk(rows):
            logits = tf.matmul(rows[:, :-1], kernel, transpose_b=True) + bias
            # Each chunk's noise from the seed and its first row's index (exact in float32).
            chunk_seed = tf.random.experimental.stateless_fold_in(
                seed, tf.cast(rows[0, -1], tf.int32))
            # Gumbel noise from float64 uniforms in [0, 1): a float32 cast would round the
            # largest to 1 (in about one row in a thousand at 32k words) and give that word
            # a near-certain draw.
            uniform = stateless_uniform(tf.shape(logits), chunk_seed)
            gumbel = tf.cast(-tf.math.log(-tf.math.log(uniform)), tf.float32)
            return tf.cast(tf.argmax(logits + gumbel, axis=-1), tf.int32)

        def bounded(rows):
            return map_in_chunks(chunk, rows, max(1, MAX_LOGITS_PER_CHUNK // self.vocabulary_size),
                                 tf.TensorSpec([None], tf.int32))

        index = tf.cast(tf.range(tf.shape(outputs)[0]), tf.float32)[:, None]
        rows = tf.concat([outputs, index], 1)
        return bounded(rows) if count is None else map_leading_rows(
            bounded, rows, count, LEADING_ROW_CHUNKS, tf.int32)

    def draw_seed(self):
        """A new int32 `[2]` seed for the sampled candidates. The op's seed is the same on
        every worker (`set_random_seed` and one graph each): each replica of a strategy folds
        in its id, so none repeats another's candidates."""
        seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
        context = tf.distribute.get_replica_context()
        if context is not None:
            seed = tf.random.experimental.stateless_fold_in(seed,
                                                            context.replica_id_in_sync_group)
        return seed

    def load_own_variables(self, store):
        if self._loaded_by_owner and not len(store.keys()):
            return  # a file whose owner held these weights itself (`ElmoLanguageModel` 0.1)
        super().load_own_variables(store)

    def compute_output_shape(self, outputs_shape, targets_shape=None):
        return tuple(outputs_shape[:1])

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, num_negatives=self.num_negatives)
        return config
