"""`MaskedElmoLanguageModel`: Masked ELMo's pre-training task (BERT's masked-LM loss)."""

import keras
import tensorflow as tf

from elmo_tf.metrics.perplexity import Perplexity
from elmo_tf.models.language_model import LanguageModel


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedElmoLanguageModel(LanguageModel):
    """Pre-trains a `MaskedElmoBackbone` with BERT's masked-LM objective.

    The backbone reads sentences in which some tokens were masked
    (`elmo_tf.data.masked_language_model_dataset`, `elmo_tf.ops.masking`); at every selected position a
    softmax over the word vocabulary (`WordSoftmax`: sampled, log-uniform, accidental hits
    removed, in training when the vocabulary is larger than `num_negatives`; full otherwise
    and in evaluation) predicts the original token from `[forward; backward]` of the top layer
    (`2P` wide). The loss is the mean NLL over the selected positions of the global batch;
    `perplexity` is its exponential (masked-LM perplexity).

    Inputs: `{"char_ids": int32 [batch, time, chars]}`, masked sentences without boundaries
    (every row from zero state); or `{"stream_char_ids": ...}`, masked windows of token streams
    (`<S>`/`</S>` are tokens; bidirectional truncated backpropagation through time, through
    `MaskedElmoBackbone.encode_stream`: the backbone needs `stream_rows`). Both from
    `elmo_tf.data.masked_language_model_dataset`.
    Targets: `{"targets": int32 [batch, time]}`, the original word id at selected positions,
    -1 elsewhere.

    Args:
        backbone: the `MaskedElmoBackbone` (or any `Backbone`) to train.
        vocabulary_size: V, the softmax size.
        num_negatives: sampled-softmax candidates per batch.
        dropout: on the top layer in training; the backbone's `dropout` when None.

    Example:
    >>> backbone = MaskedElmoBackbone.from_preset("tiny_masked")
    >>> model = MaskedElmoLanguageModel(backbone, vocabulary_size=len(vocab))
    >>> model.compile(optimizer=keras.optimizers.Adam(1e-3))
    >>> model.fit(masked_language_model_dataset(sentences, vocab), steps_per_epoch=100)
    """

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, dropout=None, **kwargs):
        # The softmax reads [forward; backward] of the top layer.
        super().__init__(backbone, vocabulary_size, num_negatives, dropout,
                         softmax_width=backbone.output_dim, **kwargs)
        # === Metrics ===
        self.perplexity = Perplexity(name="perplexity")

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or set(inputs) not in ({"char_ids"},
                                                               {"stream_char_ids"}):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError("MaskedElmoLanguageModel takes a dict with 'char_ids' (sentences) "
                             f"or 'stream_char_ids' (stream windows); got {got}.")
        if "stream_char_ids" in inputs:
            top = self.backbone.encode_stream(inputs["stream_char_ids"], training=training)
        else:
            top = self.backbone(inputs["char_ids"], training=training)["layers"]
        return self.top_layer(top, training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not isinstance(y, dict) or set(y) != {"targets"}:
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(f"MaskedElmoLanguageModel's targets are a dict with 'targets'; "
                             f"got {got}.")
        width = self.backbone.output_dim
        # Every position as a row, no boolean mask (static shapes under XLA): unselected
        # positions weigh 0.
        nll, valid = self.word_nll(tf.reshape(y_pred, [-1, width]),
                                   tf.reshape(y["targets"], [-1]), training)
        total = tf.reduce_sum(nll)
        count = tf.reduce_sum(tf.cast(valid, tf.float32))
        self.perplexity.update_state(total, count)
        return self.global_mean(total, count)
