"""`DownstreamTask`: what the downstream task models share."""

import keras

from elmo_tf.models.elmo_embedding import ElmoEmbedding


class DownstreamTask(keras.Model):
    """Base of the downstream task models (`TextClassifier`, `SentencePairClassifier`,
    `SequenceTagger`): functional models that read raw text, tokenize it in the graph
    (`TextTokenizer`), embed it with an `ElmoEmbedding` (a frozen biLM and a trainable scalar
    mix by default; the whole biLM with the embedding's `fine_tune=True`) and run a head.

    The default heads follow the GLUE paper's ELMo baselines (Wang et al. 2018): a BiLSTM over
    the ELMo vectors (`encoder_units` per direction; Keras's LSTM, so cuDNN on a GPU), max-pooled
    over the real tokens for sentence tasks. Outputs are logits (float32 under any policy).

    The class names (`labels`) are part of the model, so a loaded model predicts names.
    """

    def __init__(self, *, embedding, labels, encoder_units, dropout, config, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.embedding = embedding
        self.labels = None if labels is None else [str(label) for label in labels]
        self.encoder_units = int(encoder_units)
        self.dropout = float(dropout)
        self._task_config = config

    @staticmethod
    def check_arguments(embedding, labels, encoder_units, dropout, regression_allowed=False):
        """Validates the shared arguments; returns the number of outputs per prediction."""
        if not isinstance(embedding, ElmoEmbedding):
            raise TypeError(f"embedding must be an elmo_tf ElmoEmbedding; got "
                            f"{type(embedding).__name__}.")
        if embedding.num_output_representations != 1:
            raise ValueError("the task models take an ElmoEmbedding with one output "
                             "representation.")
        if not isinstance(encoder_units, int) or encoder_units < 1:
            raise ValueError(f"encoder_units must be a positive integer; got {encoder_units!r}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        if labels is None:
            if not regression_allowed:
                raise ValueError("labels (the class names) are required for this task.")
            return 1
        labels = list(labels)
        if len(labels) < 2 or len(set(map(str, labels))) != len(labels):
            raise ValueError(f"labels must be two or more distinct class names; got {labels!r}.")
        return len(labels)

    @staticmethod
    def sentence_encoder(units, name):
        """A BiLSTM over the ELMo vectors, every position's output kept (mask-aware)."""
        return keras.layers.Bidirectional(
            keras.layers.LSTM(units, return_sequences=True), name=name)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "embedding": keras.saving.serialize_keras_object(self.embedding),
                "labels": self.labels, "encoder_units": self.encoder_units,
                "dropout": self.dropout, **self._task_config}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["embedding"] = keras.saving.deserialize_keras_object(config["embedding"])
        return cls(**config)
