"""`SequenceTagger`: tokens -> one tag per token, on ELMo representations."""

import keras

from elmo_tf.layers.text_tokenizer import TextTokenizer
from elmo_tf.models.downstream.downstream_task import DownstreamTask


@keras.saving.register_keras_serializable(package="elmo_tf")
class SequenceTagger(DownstreamTask):
    """Tags every token (part of speech, chunks, named entities in BIO tags).

    Sentences come as whitespace-separated tokens (one string per sentence: a CoNLL
    sentence's tokens joined with spaces), so that tags line up with tokens. The tokens are
    embedded (`ElmoEmbedding`), run through a BiLSTM (`encoder_units` per direction), dropped
    out and projected to `len(tags)` logits per token: `[batch, time]` logits with a Keras
    mask, so that Keras leaves padding out of the loss and the metrics.

    Args:
        embedding: an `ElmoEmbedding` (any backbone: ELMo, Masked ELMo).
        tags: the tag names, in tag-id order.
        encoder_units: the BiLSTM's units per direction.
        dropout: on the BiLSTM's outputs, in training.

    Example:
    >>> model = SequenceTagger(embedding, tags=["O", "B-PER", "I-PER"])
    >>> model(tf.constant(["Peter Blackburn spoke"])).shape   # [batch, time, tags]
    TensorShape([1, 3, 3])
    """

    def __init__(self, embedding, tags, encoder_units=512, dropout=0.0, **kwargs):
        self.check_arguments(embedding, tags, encoder_units, dropout)
        # === Layers ===
        tokenize = TextTokenizer("whitespace", name="tokenizer")
        encoder = self.sentence_encoder(encoder_units, name="encoder")
        drop = keras.layers.Dropout(dropout, name="dropout")
        head = keras.layers.Dense(len(tags), dtype="float32", name="logits")

        # === Functional Model ===
        text = keras.Input(shape=(), dtype="string", name="tokens")
        logits = head(drop(encoder(embedding(tokenize(text)))))
        super().__init__(inputs=text, outputs=logits, embedding=embedding, labels=tags,
                         encoder_units=encoder_units, dropout=dropout, config={}, **kwargs)

    @property
    def tags(self):
        return self.labels

    def get_config(self):
        config = super().get_config()
        config["tags"] = config.pop("labels")
        return config
