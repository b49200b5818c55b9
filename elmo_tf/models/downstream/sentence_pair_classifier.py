"""`SentencePairClassifier`: a (sentence, sentence) -> class (or score) model on ELMo
representations."""

import keras
import keras_hub

from elmo_tf.layers.masked_max_pooling import MaskedMaxPooling
from elmo_tf.layers.philox_dropout import PhiloxDropout
from elmo_tf.models.downstream.downstream_task import DownstreamTask, register_task


@register_task
@keras.saving.register_keras_serializable(package="elmo_tf")
class SentencePairClassifier(DownstreamTask, keras_hub.models.Task):
    """Classifies sentence pairs (GLUE's MRPC, QQP, MNLI, QNLI, RTE, WNLI), or scores them
    (STS-B, with `labels=None`); a `keras_hub.models.Task` (KerasHub's `TextClassifier`
    loader finds one class per backbone: the one-sentence `TextClassifier`).

    Both sentences go through the same tokenizer, `ElmoEmbedding`, BiLSTM and max pooling
    (`u`, `v`); `[u; v; |u - v|; u * v]` then goes through a `hidden_dim` tanh layer (dropout
    before and after) to `len(labels)` logits (one score for a regressor): the GLUE paper's
    pair baseline without its attention.

    Texts: `{"text_a": strings [batch], "text_b": strings [batch]}`, which the preprocessor
    turns into the model's inputs `{"text_a_char_ids": ..., "text_b_char_ids": ...}`.

    Args:
        embedding: an `ElmoEmbedding` (any backbone: ELMo, Masked ELMo).
        labels: the class names, in class-id order; None for a regressor (one output).
        tokenizer: `"whitespace"` or `"wordpunct"`, as the biLM's corpus was tokenized.
        encoder_units: the BiLSTM's units per direction.
        hidden_dim: the matching layer's size.
        dropout: on the matching features and the hidden layer, in training.

    Example:
    >>> model = SentencePairClassifier(embedding, labels=["not_entailment", "entailment"])
    >>> model.predict({"text_a": tf.constant(["A man sleeps ."]),
    ...                "text_b": tf.constant(["A person rests ."])}).shape
    (1, 2)
    """

    task_name = "pair"  # plain files: label<TAB>text_a<TAB>text_b
    input_names = ("text_a", "text_b")

    def __init__(self, embedding, labels=None, tokenizer="whitespace", encoder_units=512,
                 hidden_dim=512, dropout=0.0, **kwargs):
        outputs = self.check_arguments(embedding, labels, encoder_units, dropout,
                                       regression_allowed=True)
        if not isinstance(hidden_dim, int) or hidden_dim < 1:
            raise ValueError(f"hidden_dim must be a positive integer; got {hidden_dim!r}.")
        # === Layers ===
        preprocessor = self.preprocessor_for(embedding, tokenizer, self.input_names)
        encoder = self.sentence_encoder(encoder_units, name="encoder")
        pool = MaskedMaxPooling(name="max_pooling")
        match_dropout = PhiloxDropout(dropout, name="match_dropout")
        hidden = keras.layers.Dense(hidden_dim, activation="tanh", name="hidden")
        hidden_dropout = PhiloxDropout(dropout, name="hidden_dropout")
        head = keras.layers.Dense(outputs, dtype="float32", name="logits")

        # === Functional Model ===
        features = preprocessor.feature_inputs()  # each text's char ids
        u, v = (pool(encoder(embedding(features[f"{name}_char_ids"])))
                for name in self.input_names)
        matched = keras.layers.Concatenate(name="matching")(
            [u, v, keras.ops.abs(u - v), u * v])
        logits = head(hidden_dropout(hidden(match_dropout(matched))))
        super().__init__(inputs=features, outputs=logits, embedding=embedding,
                         preprocessor=preprocessor, labels=labels,
                         encoder_units=encoder_units, dropout=dropout,
                         config={"tokenizer": tokenizer, "hidden_dim": hidden_dim}, **kwargs)
        self.tokenizer = tokenizer
        self.hidden_dim = hidden_dim
