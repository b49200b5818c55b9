"""`LanguageModel`: a `Task` that pre-trains a backbone by predicting words with a softmax."""

import keras
import tensorflow as tf

from elmo_tf.layers.word_softmax import WordSoftmax
from elmo_tf.models.backbone import with_backbone_object
from elmo_tf.models.task import Task


class LanguageModel(Task, keras.Model):
    """Base of the pre-training tasks that predict words from a backbone's top layer
    (`ElmoLanguageModel`, `MaskedElmoLanguageModel`): one softmax over the word vocabulary
    (`softmax`, a `WordSoftmax`: sampled in training when the vocabulary is larger than
    `num_negatives`, full otherwise and in evaluation), dropout on the top layer in training,
    and losses that are means over the global batch's predicted words: a subclass's
    `compute_loss(x, y, y_pred, sample_weight, training, loss_counts=None)` divides its sums by
    `loss_counts` (`global_loss_counts(x, y)`, computed when not given). The `loss` metric
    (`loss`, `val_loss`) weighs each batch by its predicted words (`loss_weight`): it is the
    per-word cross-entropy whose exponential is the perplexity.

    Args:
        backbone: the `Backbone` to train.
        vocabulary_size: V, the softmax size.
        num_negatives: sampled-softmax candidates per batch.
        dropout: on the top layer in training; the backbone's `dropout` when None.
        softmax_width: the width of the vectors the softmax reads.

    Example:
    >>> class MyLanguageModel(LanguageModel):
    ...     def __init__(self, backbone, vocabulary_size, **kwargs):
    ...         super().__init__(backbone, vocabulary_size,
    ...                          softmax_width=backbone.output_dim, **kwargs)
    """

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, dropout=None,
                 softmax_width=None, **kwargs):
        super().__init__(**kwargs)
        # === Layers ===
        self.backbone = backbone
        self.softmax = WordSoftmax(vocabulary_size, num_negatives, name="softmax")

        # === Config ===
        self.dropout = getattr(backbone, "dropout", 0.0) if dropout is None else float(dropout)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        self.softmax.build((None, softmax_width))

    @property
    def vocabulary_size(self):
        return self.softmax.vocabulary_size

    @property
    def num_negatives(self):
        return self.softmax.num_negatives

    def set_vocabulary(self, tokens):
        """Gives the task the softmax's words (`tokens` in id order), for a loss that reads
        them (`MaskedElmoLanguageModel`'s replaced-token detection); `elmo-tf train` calls it
        on every run. The softmax's ids alone are enough for the other losses: nothing to do.
        """

    def top_layer(self, layers, training, index=-1):
        """The top layer of `layers` (`[batch, num_layers, time, width]`; or the layer at
        `index`) as float32, dropped out in training."""
        top = tf.cast(layers[:, index], "float32")
        if training and self.dropout > 0:
            top = tf.nn.dropout(top, rate=self.dropout)
        return top

    def word_nll(self, outputs, targets, training, seed=None, columns=None):
        """`(nll, valid)` of rows `outputs` `[n, width]` predicting `targets` `[n]` (word ids, -1
        where there is nothing to predict): the NLL is 0 where `valid` is false. Every row is
        scored, no boolean mask, so that shapes stay static under XLA. `seed`, `columns`:
        `WordSoftmax`'s."""
        targets = tf.cast(targets, tf.int32)
        valid = targets >= 0
        nll = self.softmax(outputs, tf.maximum(targets, 0), training=training, seed=seed,
                           columns=columns)
        return tf.where(valid, nll, 0.0), valid

    def selected_nll(self, outputs, targets, training, seed=None, columns=None, drawable=None,
                     sparse=True):
        """`(sum of NLLs, count)` of the rows of `outputs` `[n, width]` that have a target
        (`targets` `[n]`: word ids, -1 where there is nothing to predict): only those rows are
        gathered and scored, so that a loss over a few positions (the masked LM's) pays for
        those only. `seed`, `columns`: `WordSoftmax`'s.

        Under XLA (`self.xla`), which compiles static shapes: with `sparse` (few rows have a
        target) the rows with a target are sorted first and scored in equal chunks, as many
        as they fill (`WordSoftmax`'s `count`), at most an eighth of the rows more; without
        (a loss with a target at almost every row: the next-token and cloze losses), every
        row is scored in one product and those without a target weigh 0. The same sums.

        With `drawable` (bool `[V]`: the words that may be drawn), each of those rows also
        draws a word from its full softmax (`WordSoftmax.nll_and_samples`: a generator's
        samples): `(sum, count, drawn)`, `drawn` int32 `[n]`, -1 at the rows without a target;
        under XLA the rows with a target are sorted first, scored and drawn in equal chunks as
        with `sparse`, and each drawn word goes back to its row.
        """
        targets = tf.cast(targets, tf.int32)
        selected = targets >= 0
        count = tf.reduce_sum(tf.cast(selected, tf.int32))
        if not self.xla:
            where = tf.where(selected)
            rows, row_targets = tf.gather(outputs, where[:, 0]), tf.gather(targets, where[:, 0])
            if drawable is None:
                return (tf.reduce_sum(self.softmax(rows, row_targets, training=training,
                                                   seed=seed, columns=columns)),
                        tf.cast(count, tf.float32))
            nll, words = self.softmax.nll_and_samples(rows, row_targets, training, seed,
                                                      drawable)
            return (tf.reduce_sum(nll), tf.cast(count, tf.float32),
                    tf.tensor_scatter_nd_update(tf.fill(tf.shape(targets), -1), where, words))
        if sparse or drawable is not None:
            order = tf.argsort(tf.cast(~selected, tf.int32), stable=True)  # selected first
            rows, row_targets = tf.gather(outputs, order), tf.gather(tf.maximum(targets, 0), order)
            if drawable is not None:
                nll, words = self.softmax.nll_and_samples(rows, row_targets, training, seed,
                                                          drawable, count)  # 0 past count
                words = tf.scatter_nd(order[:, None], words, tf.shape(targets))  # row order
                return (tf.reduce_sum(nll), tf.cast(count, tf.float32),
                        tf.where(selected, words, -1))
            nll = self.softmax(rows, row_targets, training=training, seed=seed, columns=columns,
                               count=count)  # 0 past count
        else:
            nll, _ = self.word_nll(outputs, targets, training, seed=seed, columns=columns)
        return tf.reduce_sum(nll), tf.cast(count, tf.float32)

    def global_loss_counts(self, x, y):
        """The number of words each target of `y` asks to predict (ids >= 0), summed over the
        replicas' batches: the denominators of the loss's means (`CompiledStep`; the loss is
        the mean over the global batch's predicted words, and Keras sums the replicas'
        gradients, so a replica's loss is its part of that mean)."""
        if not isinstance(y, dict):
            return None  # compute_loss refuses such targets, with the reason
        return self.summed_over_replicas({
            name: tf.reduce_sum(tf.cast(tf.cast(targets, tf.int32) >= 0, tf.float32))
            for name, targets in y.items()})

    def loss_weight(self, x, counts):
        """The words a batch's loss is the mean over (all its targets' counts, global): the
        `loss` metric is then the per-word cross-entropy of everything seen, whose exponential
        is `perplexity` (`CompiledStep.loss_weight`)."""
        return tf.add_n(list(counts.values()))

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "backbone": keras.saving.serialize_keras_object(self.backbone),
                "vocabulary_size": self.vocabulary_size, "num_negatives": self.num_negatives,
                "dropout": self.dropout}

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone_object(config))
