"""`ToyLanguageModel`: the toy's pre-training task, next-word prediction from the forward half."""

import tensorflow as tf

from elmo_tf.metrics.perplexity import Perplexity
from elmo_tf.models.language_model import LanguageModel


class ToyLanguageModel(LanguageModel):
    """Inputs `{"char_ids": [batch, time, chars]}` (sentences), targets `{"targets": [batch,
    time]}` (the next word's id, -1 where there is none)."""

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, dropout=None, **kwargs):
        super().__init__(backbone, vocabulary_size, num_negatives, dropout,
                         softmax_width=backbone.token_dim, **kwargs)
        self.perplexity = Perplexity(name="perplexity")

    def call(self, inputs, training=False):
        return self.top_layer(self.backbone(inputs["char_ids"], training=training)["layers"],
                              training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True,
                     loss_counts=None):
        width = self.backbone.token_dim
        nll, valid = self.word_nll(tf.reshape(y_pred[..., :width], [-1, width]),
                                   tf.reshape(y["targets"], [-1]), training)
        total = tf.reduce_sum(nll)
        count = tf.reduce_sum(tf.cast(valid, tf.float32))
        self.perplexity.update_state(total, count)
        counts = loss_counts or self.global_loss_counts(x, y)
        return tf.math.divide_no_nan(total, counts["targets"])
