"""`SequenceTagger`: tokens -> one tag per token, on ELMo representations."""

import keras
import keras_hub
import tensorflow as tf

from elmo_tf.data.conll import read_conll
from elmo_tf.layers.philox_dropout import PhiloxDropout
from elmo_tf.metrics import scores
from elmo_tf.models.downstream.downstream_task import (
    DownstreamTask,
    _softmax,
    check_known_labels,
    register_task,
)
from elmo_tf.ops.padding import char_ids_mask


@register_task
@keras.saving.register_keras_serializable(package="elmo_tf")
class SequenceTagger(DownstreamTask, keras_hub.models.Task):
    """Tags every token (part of speech, chunks, named entities in BIO tags); a
    `keras_hub.models.Task`.

    Sentences come as whitespace-separated tokens (one string per sentence: a CoNLL
    sentence's tokens joined with spaces), so that tags line up with tokens. The preprocessor
    turns them into char ids; the model embeds them (`ElmoEmbedding`), run through a BiLSTM (`encoder_units` per direction), dropped
    out and projected to `len(tags)` logits per token: `[batch, time]` logits with a Keras
    mask, so that Keras leaves padding out of the metrics. The loss is the cross-entropy's
    mean over the real tokens of the global batch, however the replicas of a strategy split
    them (`global_loss_counts`): 2 replicas train as 1; the `loss` logged is the mean over
    every token of the epoch (not over its batches' means).

    Args:
        embedding: an `ElmoEmbedding` (any backbone: ELMo, Masked ELMo).
        tags: the tag names, in tag-id order.
        encoder_units: the BiLSTM's units per direction.
        dropout: on the BiLSTM's outputs, in training.

    Example:
    >>> model = SequenceTagger(embedding, tags=["O", "B-PER", "I-PER"])
    >>> model.predict(tf.constant(["Peter Blackburn spoke"])).shape   # [batch, time, tags]
    (1, 3, 3)
    """

    task_name = "tag"  # plain files: CoNLL
    input_names = ("tokens",)
    fixed_tokenizer = "whitespace"  # tokens separated by spaces, to line up with the tags

    def __init__(self, embedding, tags, encoder_units=512, dropout=0.0, **kwargs):
        self.check_arguments(embedding, tags, encoder_units, dropout)
        # === Layers ===
        preprocessor = self.preprocessor_for(embedding, self.fixed_tokenizer,
                                             self.input_names)
        encoder = self.sentence_encoder(encoder_units, name="encoder")
        drop = PhiloxDropout(dropout, name="dropout")
        head = keras.layers.Dense(len(tags), dtype="float32", name="logits")

        # === Functional Model ===
        features = preprocessor.feature_inputs()
        logits = head(drop(encoder(embedding(features["char_ids"]))))
        super().__init__(inputs=features, outputs=logits, embedding=embedding,
                         preprocessor=preprocessor, labels=tags,
                         encoder_units=encoder_units, dropout=dropout, config={}, **kwargs)

    @property
    def tags(self):
        return self.labels

    # --- the loss: a mean over the global batch's tokens ----------------------------------
    def global_loss_counts(self, x, y):
        """`{"tokens": the real tokens of the global batch}` (summed over the replicas, outside
        a compiled step: `CompiledStep`), the loss's denominator."""
        return self.summed_over_replicas(
            {"tokens": tf.reduce_sum(tf.cast(char_ids_mask(x["char_ids"]), tf.float32))})

    def loss_weight(self, x, counts):
        return counts["tokens"]  # the `loss` metric: the mean over every token seen

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True,
                     loss_counts=None):
        """The tags' cross-entropy summed over this replica's real tokens (those with char
        ids), over the global batch's (`loss_counts`, computed when not given), plus the
        regularization losses' share of a replica. With `sample_weight`: Keras's loss."""
        if sample_weight is not None:
            return super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                        training=training)
        counts = loss_counts or self.global_loss_counts(x, y)
        mask = char_ids_mask(x["char_ids"])
        if isinstance(y, tf.RaggedTensor):
            y = y.to_tensor(0)
        # One tag per token: a tag matrix of another width is misaligned (as Keras's loss
        # refused it; XLA drops the check, and `finetune` pads both to one width).
        tf.debugging.assert_equal(
            tf.shape(y)[1], tf.shape(y_pred)[1],
            message="a SequenceTagger's tags must be one per token of its sentences "
                    "(whitespace-separated), padded to the longest sentence")
        y = tf.cast(y, tf.int32)
        nll = keras.losses.sparse_categorical_crossentropy(y, y_pred, from_logits=True)
        loss = tf.math.divide_no_nan(tf.reduce_sum(tf.where(mask, nll, 0.0)),
                                     counts["tokens"])
        if self.losses:  # each summed in float32, a replica's share of it
            loss += tf.add_n([tf.cast(tf.reduce_sum(extra), tf.float32) for extra in self.losses]
                             ) / tf.distribute.get_strategy().num_replicas_in_sync
        return loss

    def compile(self, optimizer="auto", loss="auto", **kwargs):
        """`DownstreamTask.compile`; the loss is the tagger's own (`compute_loss`: the tags'
        cross-entropy, a mean over the global batch's tokens), so `loss` is `"auto"` or
        Keras's `SparseCategoricalCrossentropy(from_logits=True)`, which it computes."""
        if loss != "auto" and not (
                isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
                and loss.get_config().get("from_logits")
                and loss.get_config().get("ignore_class") is None):
            raise ValueError(f"a SequenceTagger's loss is the tags' cross-entropy of its logits, "
                             f"over the real tokens (compute_loss); got loss={loss!r}: compile "
                             "with loss='auto'.")
        super().compile(optimizer, loss, **kwargs)

    # --- fine-tuning on CoNLL files ------------------------------------------------------
    @classmethod
    def create(cls, embedding, labels, tokenizer, encoder_units, dropout, **options):
        return cls(embedding, tags=labels, encoder_units=encoder_units, dropout=dropout,
                   **options)

    @classmethod
    def read_examples(cls, path, header=False):
        """`(texts, tags)` of a CoNLL file: a sentence's tokens joined with spaces, its tags
        (CoNLL files have no header line)."""
        if header:
            raise ValueError("--header is for labelled-text files (classify, pair); a CoNLL "
                             "file has no header line.")
        tokens, tags = read_conll(path)
        return [(" ".join(sentence),) for sentence in tokens], tags

    @classmethod
    def prepare_labels(cls, train_labels, dev_labels, train_path, dev_path):
        names = sorted({t for tags in train_labels for t in tags})
        check_known_labels(dev_path, {t for tags in dev_labels for t in tags}, names, "tags")
        index = {t: i for i, t in enumerate(names)}
        return (names, [[index[t] for t in tags] for tags in train_labels],
                [[index[t] for t in tags] for tags in dev_labels])

    @classmethod
    def metrics_for(cls, names):
        """Span F1 first for chunk tags (`B-X`, `I-X`, `O`, ...), token accuracy alone
        otherwise (parts of speech)."""
        chunked = all(t == "O" or (t[:2] in ("B-", "I-", "E-", "S-") and len(t) > 2)
                      for t in names)
        return ["span_f1", "token_accuracy"] if chunked else ["token_accuracy"]

    # --- targets, what the logits mean -----------------------------------------------------
    def targets(self, labels):
        return tf.ragged.constant(labels, tf.int32)

    def scores(self, logits, gold, metrics):
        gold_tags = [[self.tags[k] for k in g] for g in gold]
        predicted = [[self.tags[k] for k in row[:len(g)].argmax(-1)]
                     for row, g in zip(logits, gold)]
        return {m: getattr(scores, m)(gold_tags, predicted) for m in metrics}

    def decode(self, logits, text, scores=False):
        """The tags of the text's tokens, separated by spaces; with `scores`, each as
        `tag=p`, its probability."""
        rows = logits[:len(text[0].split())]
        best = rows.argmax(-1)
        if not scores:
            return " ".join(self.tags[k] for k in best)
        probabilities = _softmax(rows)
        return " ".join(f"{self.tags[k]}={probabilities[i, k]:.4f}" for i, k in enumerate(best))

    def serving_outputs(self, texts, logits):
        """`logits` and `tags` strings `[batch, time]` (`""` past each sentence's tokens)."""
        real = tf.not_equal(self.preprocessor.tokens(texts), "")
        return {"logits": logits, "tags": tf.where(
            real, tf.gather(tf.constant(self.tags), tf.argmax(logits, -1)), "")}

    def get_config(self):
        config = super().get_config()
        config["tags"] = config.pop("labels")
        return config
