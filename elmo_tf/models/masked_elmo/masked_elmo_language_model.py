"""`MaskedElmoLanguageModel`: Masked ELMo's pre-training task (BERT's masked-LM loss)."""

import keras
import tensorflow as tf

from elmo_tf.checks import non_negative_number_problems
from elmo_tf.metrics.perplexity import Perplexity
from elmo_tf.models.language_model import LanguageModel


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedElmoLanguageModel(LanguageModel):
    """Pre-trains a `MaskedElmoBackbone` with BERT's masked-LM objective.

    The backbone reads sentences in which some tokens were masked
    (`elmo_tf.data.masked_language_model_dataset`, `elmo_tf.ops.masking`); at every selected
    position, and only there (the selected rows are gathered before the softmax), a softmax
    over the word vocabulary (`WordSoftmax`: sampled, log-uniform, accidental hits removed, in
    training when the vocabulary is larger than `num_negatives`; full otherwise and in
    evaluation) predicts the original token from `[forward; backward]` of the top layer (`2P`
    wide). The loss is the mean NLL over the selected positions of the global batch;
    `perplexity` is its exponential (masked-LM perplexity).

    With `next_token_weight` > 0 (beyond the paper; `docs/masked_elmo.md`), the loss adds that
    weight times ELMo's next-token loss on the *first* layer, whose directions have each read
    one side only (layer 2 on reads both): on the `<S> .. </S>` grid its forward half predicts
    the next word and its backward half the previous one, through the same softmax and its
    candidates (each half against its half of the softmax's columns: what `[forward; 0]` and
    `[0; backward]` would score, without the zeros), averaged over both directions; so every
    token, not 15 % of them, supervises the token encoder and the first layer. `next_token_perplexity` is that
    loss's perplexity. Sentence inputs only; training batches must hold the next-token
    targets. In evaluation the loss is the masked LM's alone (so that held-out losses compare
    across runs); `next_token_perplexity` is measured where the batches hold its targets.

    Inputs: `{"char_ids": int32 [batch, time, chars]}`, masked sentences without boundaries
    (every row from zero state); or `{"stream_char_ids": ...}`, masked windows of token streams
    (`<S>`/`</S>` are tokens; bidirectional truncated backpropagation through time, through
    `MaskedElmoBackbone.encode_stream`: the backbone needs `stream_rows`). Both from
    `elmo_tf.data.masked_language_model_dataset`.
    Targets: `{"targets": int32 [batch, time]}`, the original word id at selected positions,
    -1 elsewhere; with the next-token loss, `"forward_targets"` and `"backward_targets"` int32
    `[batch, time + 2]` too (`masked_language_model_dataset(next_token_targets=True)`).

    Args:
        backbone: the `MaskedElmoBackbone` (or any `Backbone`) to train.
        vocabulary_size: V, the softmax size.
        num_negatives: sampled-softmax candidates per batch.
        dropout: on the top layer in training; the backbone's `dropout` when None.
        next_token_weight: the weight of the first layer's next-token loss (0: BERT's masked LM
            alone).

    Example:
    >>> backbone = MaskedElmoBackbone.from_preset("tiny_masked")
    >>> model = MaskedElmoLanguageModel(backbone, vocabulary_size=len(vocab))
    >>> model.compile(optimizer=keras.optimizers.Adam(1e-3))
    >>> model.fit(masked_language_model_dataset(sentences, vocab), steps_per_epoch=100)
    """

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, dropout=None,
                 next_token_weight=0.0, **kwargs):
        # The softmax reads [forward; backward] of the top layer.
        super().__init__(backbone, vocabulary_size, num_negatives, dropout,
                         softmax_width=backbone.output_dim, **kwargs)
        problems = non_negative_number_problems(next_token_weight=next_token_weight)
        if problems:
            raise ValueError(problems[0] + ".")
        self.next_token_weight = float(next_token_weight)
        # === Metrics ===
        self.perplexity = Perplexity(name="perplexity")
        if self.next_token_weight:
            self.next_token_perplexity = Perplexity(name="next_token_perplexity")

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or set(inputs) not in ({"char_ids"},
                                                               {"stream_char_ids"}):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError("MaskedElmoLanguageModel takes a dict with 'char_ids' (sentences) "
                             f"or 'stream_char_ids' (stream windows); got {got}.")
        if "stream_char_ids" in inputs:
            if self.next_token_weight:
                raise ValueError("the next-token loss (next_token_weight) reads sentences "
                                 "('char_ids'), not stream windows.")
            top = self.backbone.encode_stream(inputs["stream_char_ids"], training=training)
            return self.top_layer(top, training)
        outputs = self.backbone(inputs["char_ids"], training=training)
        top = self.top_layer(outputs["layers"], training)
        if not self.next_token_weight:
            return top
        # The first layer on the <S> .. </S> grid: each direction has read one side only.
        return {"masked": top, "next_token": self.top_layer(
            outputs["layers_with_boundaries"], training, index=1)}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True,
                     loss_counts=None):
        """The loss; `loss_counts`: `global_loss_counts(y)` when already computed."""
        next_token = ("forward_targets", "backward_targets")
        keys = set(y) if isinstance(y, dict) else None
        if keys not in ({"targets"}, {"targets", *next_token}) or (
                keys != {"targets"} and not self.next_token_weight):
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError("MaskedElmoLanguageModel's targets are a dict with 'targets' (and, "
                             "for the next-token loss of a model with next_token_weight > 0, "
                             f"'forward_targets' and 'backward_targets'); got {got}.")
        width = self.backbone.output_dim
        masked = y_pred["masked"] if isinstance(y_pred, dict) else y_pred
        # Only the selected positions are scored (the others have no target).
        seed = self.softmax.draw_seed() if training and self.softmax.samples else None
        total, count = self.selected_nll(tf.reshape(masked, [-1, width]),
                                         tf.reshape(y["targets"], [-1]), training, seed)
        self.perplexity.update_state(total, count)
        totals = loss_counts or self.global_loss_counts(y)
        loss = tf.math.divide_no_nan(total, totals["targets"])
        if keys == {"targets"}:
            if self.next_token_weight and training:
                raise ValueError("this model trains with a next-token loss (next_token_weight "
                                 f"{self.next_token_weight:g}): its training batches need "
                                 "'forward_targets' and 'backward_targets' too "
                                 "(masked_language_model_dataset(next_token_targets=True)).")
            return loss
        # The forward half predicts the next word, the backward half the previous one, each
        # against its half of the softmax's columns (as [forward; 0] and [0; backward] would,
        # without the zeros), with the masked LM's candidates.
        first = y_pred["next_token"]
        half = width // 2
        sums, counts = zip(*(
            self.selected_nll(tf.reshape(part, [-1, half]), tf.reshape(y[name], [-1]),
                              training, seed, columns)
            for part, name, columns in ((first[..., :half], "forward_targets", (0, half)),
                                        (first[..., half:], "backward_targets",
                                         (half, width)))))
        self.next_token_perplexity.update_state(sums[0] + sums[1], counts[0] + counts[1])
        if not training:  # measured, but held-out losses stay the masked LM's, as any run's
            return loss
        means = [tf.math.divide_no_nan(sums[k], totals[name]) for k, name in enumerate(next_token)]
        return loss + self.next_token_weight * 0.5 * (means[0] + means[1])

    def loss_weight(self, x, counts):
        """The masked LM's predicted words (the next-token loss, an auxiliary term of the
        training loss, is a mean over other words): in evaluation the `loss` metric is the
        masked LM's cross-entropy, whose exponential is `perplexity`."""
        return counts["targets"]

    def get_config(self):
        return {**super().get_config(), "next_token_weight": self.next_token_weight}
