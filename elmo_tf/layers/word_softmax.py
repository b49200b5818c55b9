"""`WordSoftmax`: a language model's output layer over a word vocabulary, sampled or full."""

import math

import keras
import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.ops.softmax import full_softmax_nll, sampled_softmax_logits, sampled_softmax_nll


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

    def call(self, outputs, targets, training=False, seed=None, columns=None):
        outputs = tf.cast(outputs, tf.float32)
        if training and self.samples:
            seed = self.draw_seed() if seed is None else seed
            return sampled_softmax_nll(self.kernel, self.bias, outputs, targets,
                                       self.num_negatives, seed, columns)
        return full_softmax_nll(self.kernel, self.bias, outputs, targets, columns)

    def nll_and_samples(self, outputs, targets, training=False, seed=None):
        """Each row's NLL (as `call`) and a word drawn from the row's softmax: a generator's
        loss and its samples (`MaskedElmoLanguageModel`'s replaced-token detection).

        The words are drawn from the distribution the loss scores: in training with `samples`,
        the sampled softmax's (the row's target and the call's candidates, logits corrected
        by their expected counts, accidental hits removed: an importance-sampled estimate of
        the full softmax); otherwise the full softmax's. No gradient flows through the draw.

        Args:
            outputs: float `[n, P]`.
            targets: int `[n]` in `[0, V)`.
            training: Python bool, as `call`'s.
            seed: int32 `[2]`: the candidates' seed (drawn when None); the draw's is folded
                from it.

        Returns:
            `(nll, words)`: float32 `[n]` and int32 `[n]`.
        """
        outputs = tf.cast(outputs, tf.float32)
        targets = tf.cast(targets, tf.int32)
        seed = self.draw_seed() if seed is None else seed
        if training and self.samples:
            logits, candidates = sampled_softmax_logits(self.kernel, self.bias, outputs,
                                                        targets, self.num_negatives, seed)
            ids = tf.concat([tf.zeros([1], tf.int32), candidates], 0)
            choice = _draw(logits, seed)
            words = tf.where(choice == 0, targets, tf.gather(ids, choice))
            return tf.reduce_logsumexp(logits, axis=1) - logits[:, 0], words
        logits = tf.matmul(outputs, self.kernel, transpose_b=True) + self.bias
        return (tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits),
                _draw(logits, seed))

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


def _draw(logits, seed):
    """One column per row of `logits` `[n, k]`, drawn from its softmax (no gradient)."""
    seed = tf.random.experimental.stateless_fold_in(seed, 1)
    return tf.cast(tf.random.stateless_categorical(tf.stop_gradient(logits), 1, seed)[:, 0],
                   tf.int32)
