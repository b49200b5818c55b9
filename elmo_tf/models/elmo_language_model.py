"""`ElmoLanguageModel`: the biLM pre-training task (forward and backward next-token losses)."""

import math

import keras
import tensorflow as tf

from elmo_tf.layers.masking import char_ids_mask
from elmo_tf.layers.sampled_softmax import full_softmax_nll, sampled_softmax_nll
from elmo_tf.metrics.perplexity import Perplexity

INPUT_KEYS = ("char_ids", "backward_char_ids")
TARGET_KEYS = ("forward_targets", "backward_targets")


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoLanguageModel(keras.Model):
    """Pre-trains an `ElmoBackbone` as ELMo's bidirectional language model.

    `../shared/spec/literature.md` §2.4-2.5: the forward stack predicts the next token and the
    backward stack the previous one; one softmax (`softmax_kernel` `[V, P]`, `softmax_bias`)
    serves both directions; the loss is `0.5 * (forward mean NLL + backward mean NLL)`. In
    training the softmax is sampled: `num_negatives` candidates per batch, drawn once for both
    directions as TF's log-uniform sampler draws them (so the vocabulary must be sorted by
    decreasing frequency, as `elmo_tf.data.build_vocabulary` writes it), accidental hits removed, as
    bilm-tf's `tf.nn.sampled_softmax_loss` does (computed with ops XLA compiles:
    `elmo_tf.layers.sampled_softmax`). Evaluation always uses the full softmax. A
    vocabulary of at most `num_negatives` words trains with the full softmax too (sampling
    it all would be the full softmax with noise). Dropout is the backbone's `dropout`: on every
    LSTM layer's input and, here, on the top layer before the softmax (bilm-tf's use of its one
    `dropout` option).

    Inputs (a dict; sentence boundaries are part of the data, not added here):
        "char_ids": int32 `[batch, time, chars]`, right-padded with all-zero rows.
        "backward_char_ids": optional, the same shape: what the backward stack reads when the
            directions read different text (stream batches, see `elmo_tf.data`). Without it both
            stacks read "char_ids".
    Targets (a dict): "forward_targets" and "backward_targets", int32 `[batch, time]` vocabulary
    ids of the token each position must predict, -1 where there is none (padding, the last
    token forward, the first backward).

    The model's output is the top biLM layer `[batch, time, 2P]` (float32); `compute_loss`
    turns it into the loss and updates the metrics `forward_perplexity`,
    `backward_perplexity` and `perplexity` (of both directions' tokens together: the geometric
    mean of the two). In training they are the sampled softmax's estimate, biased low; `evaluate`
    reports the full softmax's.

    A stateful backbone (stream batches) carries its LSTM state from batch to batch; `evaluate`
    starts and leaves it at zero.

    Under a `tf.distribute` strategy the loss is still the mean over all the global batch's
    tokens (the replicas sum their token counts), whatever the lengths of each replica's
    sentences: without dropout and with the full softmax, N replicas train as one replica on
    the same global batch (each replica draws its own negatives and dropout masks).

    Args:
        backbone: the `ElmoBackbone` to train.
        vocabulary_size: V, the softmax size.
        num_negatives: sampled-softmax candidates per batch (bilm-tf: 8192).

    Example:
    >>> backbone = ElmoBackbone(ElmoConfig.from_preset("small"), dropout=0.1)
    >>> lm = ElmoLanguageModel(backbone, vocabulary_size=50_000)
    >>> lm.compile(optimizer=elmo_tf.optimizers.SparseAdagrad(
    ...     0.2, initial_accumulator_value=1.0, global_clipnorm=10.0))
    >>> lm.fit(elmo_tf.data.language_model_dataset(sentences, vocabulary, batch_size=64),
    ...        epochs=1)
    """

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, **kwargs):
        super().__init__(**kwargs)
        if isinstance(vocabulary_size, bool) or int(vocabulary_size) != vocabulary_size \
                or vocabulary_size < 4:
            raise ValueError(f"vocabulary_size must be an integer >= 4 (the specials and a "
                             f"word); got {vocabulary_size!r}.")
        if isinstance(num_negatives, bool) or int(num_negatives) != num_negatives \
                or num_negatives < 1:
            raise ValueError(f"num_negatives must be a positive integer; got {num_negatives!r}.")
        # === Layers ===
        self.backbone = backbone
        projection_dim = backbone.config.projection_dim
        self.softmax_kernel = self.add_weight(
            name="softmax_kernel", shape=(int(vocabulary_size), projection_dim), dtype="float32",
            initializer=keras.initializers.RandomNormal(stddev=1.0 / math.sqrt(projection_dim)))
        self.softmax_bias = self.add_weight(name="softmax_bias", shape=(int(vocabulary_size),),
                                            dtype="float32", initializer="zeros")
        self.forward_perplexity = Perplexity(name="forward_perplexity")
        self.backward_perplexity = Perplexity(name="backward_perplexity")
        self.perplexity = Perplexity(name="perplexity")

        # === Config ===
        self.vocabulary_size = int(vocabulary_size)
        self.num_negatives = int(num_negatives)

    @property
    def samples_softmax(self):
        """Whether training uses the sampled softmax (V > num_negatives)."""
        return self.vocabulary_size > self.num_negatives

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or "char_ids" not in inputs \
                or set(inputs) - set(INPUT_KEYS):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"ElmoLanguageModel takes a dict with 'char_ids' and optionally "
                             f"'backward_char_ids'; got {got}.")
        char_ids = inputs["char_ids"]
        backward_char_ids = inputs.get("backward_char_ids")
        mask = char_ids_mask(char_ids)
        if backward_char_ids is None:
            embeddings, backward_embeddings = self.backbone.encode_tokens(char_ids), None
        else:  # one pass of the shared token encoder over both directions' text
            batch = tf.shape(char_ids)[0]
            both = self.backbone.encode_tokens(tf.concat([char_ids, backward_char_ids], 0))
            embeddings, backward_embeddings = both[:batch], both[batch:]
        layers = self.backbone.bilm(embeddings, mask=mask,
                                    backward_token_embeddings=backward_embeddings,
                                    training=training)
        top = tf.cast(layers[:, -1], "float32")
        if training and self.backbone.dropout > 0:
            top = tf.nn.dropout(top, rate=self.backbone.dropout)
        return top

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not isinstance(y, dict) or set(y) != set(TARGET_KEYS):
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(f"ElmoLanguageModel's targets are a dict with {list(TARGET_KEYS)};"
                             f" got {got}.")
        projection_dim = self.backbone.config.projection_dim
        # Both directions' positions as one list of rows, forward first; no boolean mask, so
        # that every shape is static under XLA (positions without a target weigh 0).
        outputs = tf.concat([tf.reshape(y_pred[..., :projection_dim], [-1, projection_dim]),
                             tf.reshape(y_pred[..., projection_dim:], [-1, projection_dim])], 0)
        targets = tf.concat([tf.reshape(tf.cast(y[k], tf.int32), [-1]) for k in TARGET_KEYS], 0)
        valid = targets >= 0
        targets = tf.maximum(targets, 0)
        if training and self.samples_softmax:
            seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
            nll = sampled_softmax_nll(self.softmax_kernel, self.softmax_bias, outputs, targets,
                                      self.num_negatives, seed)
        else:
            nll = self.full_softmax_nll(outputs, targets)
        weights = tf.reshape(tf.cast(valid, tf.float32), [2, -1])
        sums = tf.reduce_sum(tf.reshape(tf.where(valid, nll, 0.0), [2, -1]), axis=1)
        counts = tf.reduce_sum(weights, axis=1)
        self.forward_perplexity.update_state(sums[0], counts[0])
        self.backward_perplexity.update_state(sums[1], counts[1])
        # Both directions have a target for the same number of tokens in every batch.
        self.perplexity.update_state(sums[0] + sums[1], counts[0] + counts[1])
        # Keras sums the replicas' gradients, so a replica's loss is its part of the global
        # batch's mean: its NLL sum over the token count of all replicas.
        context = tf.distribute.get_replica_context()
        if context is not None:
            counts = context.all_reduce(tf.distribute.ReduceOp.SUM, counts)
        means = tf.math.divide_no_nan(sums, counts)
        return 0.5 * (means[0] + means[1])

    def full_softmax_nll(self, outputs, targets):
        """Token NLLs under the full softmax; `outputs` `[n, P]`, `targets` int `[n]` (see
        `elmo_tf.layers.sampled_softmax.full_softmax_nll`)."""
        return full_softmax_nll(self.softmax_kernel, self.softmax_bias, outputs, targets)

    def compile(self, *args, jit_compile="auto", **kwargs):
        """`keras.Model.compile`, where `jit_compile="auto"` means no XLA.

        Every op of the training and evaluation steps compiles with XLA (`jit_compile=True`
        works; a test runs it on the CPU), but Keras's "auto" turns XLA on for any model on a
        GPU, and there the recurrence's gradient was measured 60x slower compiled (H100, the
        elmo_original LSTM stacks at 384 x 20 tokens: 8.5 s against 0.14 s a step).
        `bench/gpu.py` times both, so the default can follow the measurement.
        """
        if jit_compile == "auto":
            jit_compile = False
        super().compile(*args, jit_compile=jit_compile, **kwargs)

    def train_step(self, data):
        return _multi_worker_logs(super().train_step(data))

    def test_step(self, data):
        return _multi_worker_logs(super().test_step(data))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Under a strategy Keras pulls a batch from a fresh iterator to build the model
        # symbolically, which fails under MultiWorkerMirroredStrategy (it averages the int
        # inputs across workers, keras-team/keras#20329). A built model needs no batch.
        compiled = [getattr(self, name, None) for name in ("_compile_metrics", "_compile_loss")]
        if all(layer.built for layer in self._flatten_layers()) \
                and all(c is None or c.built for c in compiled):
            iterator = data_batch = None
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def reset_states(self):
        """Zeroes a stateful backbone's carried LSTM state."""
        self.backbone.reset_states()

    def evaluate(self, *args, **kwargs):
        """`keras.Model.evaluate` from zero LSTM state, which is left at zero afterwards."""
        self.reset_states()
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            self.reset_states()

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "backbone": keras.saving.serialize_keras_object(self.backbone),
                "vocabulary_size": self.vocabulary_size, "num_negatives": self.num_negatives}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)


def _multi_worker_logs(logs):
    """Keras reduces the step logs of MultiWorkerMirroredStrategy with a mean over axis 0, which
    a scalar does not have (keras-team/keras#20585): give them one."""
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) \
            and strategy.extended._in_multi_worker_mode():
        return {name: tf.reshape(value, [1]) for name, value in logs.items()}
    return logs
