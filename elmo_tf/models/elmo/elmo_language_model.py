"""`ElmoLanguageModel`: the biLM pre-training task (forward and backward next-token losses)."""

import keras
import tensorflow as tf

from elmo_tf.metrics.perplexity import Perplexity
from elmo_tf.models.language_model import LanguageModel

INPUT_KEYS = ("char_ids", "backward_char_ids")
TARGET_KEYS = ("forward_targets", "backward_targets")


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoLanguageModel(LanguageModel):
    """Pre-trains an `ElmoBackbone` as ELMo's bidirectional language model.

    `docs/conventions.md` §7: the forward stack predicts the next token and the
    backward stack the previous one; one softmax (`softmax`, a `WordSoftmax`) serves both
    directions; the loss is `0.5 * (forward mean NLL + backward mean NLL)`. In training the
    softmax is sampled: `num_negatives` candidates per batch, drawn once for both directions
    (bilm-tf drew per direction) the way bilm-tf's `tf.nn.sampled_softmax_loss` draws them,
    accidental hits removed (with ops XLA compiles); evaluation always uses the full softmax,
    and so does training when the vocabulary has at most `num_negatives` words (sampling it
    all would be the full softmax with noise). Dropout on the top layer before the softmax, in
    training (bilm-tf used its one `dropout` option here and on every LSTM layer's input: the
    backbone's `dropout`).

    Inputs (a dict): token streams whose `<S>`/`</S>` are tokens of the text (the data
    pipeline's batches, see `elmo_tf.data`); the backbone runs them as they are
    (`ElmoBackbone.encode_stream`), adding no boundaries:
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
    the same global batch (each replica draws its own negatives; dropout masks differ between
    the replicas of one worker, while the workers of a multi-worker run repeat each other's).

    Args:
        backbone: the `ElmoBackbone` to train.
        vocabulary_size: V, the softmax size.
        num_negatives: sampled-softmax candidates per batch (bilm-tf: 8192).
        dropout: on the top layer in training; the backbone's `dropout` when None.

    Example:
    >>> backbone = ElmoBackbone(ElmoConfig.from_preset("small"), dropout=0.1)
    >>> lm = ElmoLanguageModel(backbone, vocabulary_size=50_000)
    >>> lm.compile(optimizer=elmo_tf.optimizers.SparseAdagrad(
    ...     0.2, initial_accumulator_value=1.0, global_clipnorm=10.0))
    >>> lm.fit(elmo_tf.data.language_model_dataset(sentences, vocabulary, batch_size=64),
    ...        epochs=1)
    """

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, dropout=None, **kwargs):
        # The softmax reads each direction's half of the top layer.
        super().__init__(backbone, vocabulary_size, num_negatives, dropout,
                         softmax_width=backbone.token_dim, **kwargs)
        # === Metrics ===
        self.forward_perplexity = Perplexity(name="forward_perplexity")
        self.backward_perplexity = Perplexity(name="backward_perplexity")
        self.perplexity = Perplexity(name="perplexity")

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or "char_ids" not in inputs \
                or set(inputs) - set(INPUT_KEYS):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"ElmoLanguageModel takes a dict with 'char_ids' and optionally "
                             f"'backward_char_ids'; got {got}.")
        layers = self.backbone.encode_stream(inputs["char_ids"], inputs.get("backward_char_ids"),
                                             training=training)
        return self.top_layer(layers, training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True,
                     loss_counts=None):
        """The loss; `loss_counts`: `global_loss_counts(x, y)` when already computed."""
        if not isinstance(y, dict) or set(y) != set(TARGET_KEYS):
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(f"ElmoLanguageModel's targets are a dict with {list(TARGET_KEYS)};"
                             f" got {got}.")
        projection_dim = self.backbone.token_dim
        # Both directions' positions as one list of rows, forward first; no boolean mask, so
        # that every shape is static under XLA (positions without a target weigh 0).
        outputs = tf.concat([tf.reshape(y_pred[..., :projection_dim], [-1, projection_dim]),
                             tf.reshape(y_pred[..., projection_dim:], [-1, projection_dim])], 0)
        targets = tf.concat([tf.reshape(y[k], [-1]) for k in TARGET_KEYS], 0)
        nll, valid = self.word_nll(outputs, targets, training)
        sums = tf.reduce_sum(tf.reshape(nll, [2, -1]), axis=1)
        counts = tf.reduce_sum(tf.reshape(tf.cast(valid, tf.float32), [2, -1]), axis=1)
        self.forward_perplexity.update_state(sums[0], counts[0])
        self.backward_perplexity.update_state(sums[1], counts[1])
        # Both directions have a target for the same number of tokens in every batch.
        self.perplexity.update_state(sums[0] + sums[1], counts[0] + counts[1])
        totals = loss_counts or self.global_loss_counts(x, y)
        return 0.5 * sum(tf.math.divide_no_nan(sums[k], totals[name])
                         for k, name in enumerate(TARGET_KEYS))

    def evaluate(self, *args, **kwargs):
        """`keras.Model.evaluate` from zero LSTM state, which is left at zero afterwards."""
        self.reset_states()
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            self.reset_states()

    def load_own_variables(self, store):
        # elmo-tf 0.1 kept the softmax's kernel and bias as the model's own weights.
        if len(store.keys()) == 2:
            self.softmax.kernel.assign(store["0"])
            self.softmax.bias.assign(store["1"])
            self.softmax._loaded_by_owner = True
            return
        super().load_own_variables(store)
