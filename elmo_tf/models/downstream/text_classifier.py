"""`TextClassifier`: a sentence -> class (or score) model on ELMo representations."""

import os

import keras
import keras_hub

from elmo_tf.checks import check_non_negative_int
from elmo_tf.layers.bag_of_words import BagOfWords
from elmo_tf.layers.masked_max_pooling import MaskedMaxPooling
from elmo_tf.layers.philox_dropout import PhiloxDropout
from elmo_tf.models.downstream.downstream_task import DownstreamTask, register_task
from elmo_tf.models.downstream.task_preprocessor import TaskPreprocessor
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.text.tokenizers import CORE_TOKENIZERS


@register_task
@keras.saving.register_keras_serializable(package="elmo_tf")
class TextClassifier(DownstreamTask, keras_hub.models.TextClassifier):
    """Classifies sentences (GLUE's CoLA, SST-2; sentiment, topics), or scores them (a
    regressor, with `labels=None`); a `keras_hub.models.TextClassifier`.

    Raw sentences `[batch]` are tokenized and turned into char ids by the preprocessor
    (`TaskPreprocessor`, in the input pipeline); the model embeds them (`ElmoEmbedding`), runs
    a BiLSTM (`encoder_units` per direction), max-pools over the real tokens, drops out and
    projects to `len(labels)` logits (one score for a regressor), the GLUE paper's
    single-sentence ELMo baseline. With `word_embedding_dim`, the mean of word embeddings
    trained on the task alone (`BagOfWords` of the preprocessor's hashed word ids) is
    concatenated with the pooled vector before the dropout: ELMo beside context-free word
    features, as the ELMo paper's task models use it (what it is worth on small labelled
    sets: `docs/benchmarks.md`, "Fine-tuning defaults").

    Args:
        embedding: an `ElmoEmbedding` (any backbone: ELMo, Masked ELMo).
        labels: the class names, in class-id order; None for a regressor (one output).
        tokenizer: how sentences become tokens, as the biLM's corpus was tokenized
            (`"whitespace"` or `"wordpunct"`; default: `preprocessor`'s, else whitespace).
        encoder_units: the BiLSTM's units per direction.
        dropout: on the pooled sentence vector, in training.
        word_embedding_dim: the size of the bag of task-trained word embeddings; 0 (the
            default) leaves it out: ELMo's representations alone.
        backbone, num_classes: KerasHub's way to make a classifier of a biLM's preset,
            `keras_hub.models.TextClassifier.from_preset(dir, num_classes=2)`: in place of
            `embedding` and `labels`, the backbone (its `ElmoEmbedding` made here: a frozen
            biLM, a trained mix) and the number of classes (named "0", "1", ...).
        preprocessor: a `TaskPreprocessor` whose tokenizer splits sentences as the task's
            must: KerasHub's loader passes the biLM preset's (`preprocessor_cls`; its
            tokenizer.json, written by `elmo-tf train` with the corpus's splitting). Only its
            splitting is read: the task makes the preprocessor its inputs need.

    Example:
    >>> embedding = ElmoEmbedding.from_allennlp("options.json", "weights.hdf5")
    >>> model = TextClassifier(embedding, labels=["negative", "positive"])
    >>> model.compile()   # Adam at 1e-3, the cross-entropy of the logits
    >>> model.fit(tf.constant(["a fine film .", "dull ."]), tf.constant([1, 0]), epochs=3)
    >>> model.predict(tf.constant(["a charming film ."])).argmax(-1)
    array([1])
    >>> model.save_to_preset("sentiment")   # keras_hub.models.TextClassifier.from_preset
    """

    task_name = "classify"  # plain files: label<TAB>text
    # KerasHub's loader of a classifier from a biLM's preset passes the preset's tokenizer in
    # one of these (`TaskPreprocessor._add_missing_kwargs`).
    preprocessor_cls = TaskPreprocessor
    input_names = ("text",)
    finetune_options = {"word_embedding_dim": 64}  # measured: docs/benchmarks.md

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """`DownstreamTask.from_preset`, and, for a biLM's preset (no task.json), KerasHub's
        classifier of its backbone: `from_preset(dir, num_classes=N)`.

        Example:
        >>> TextClassifier.from_preset("runs/elmo", num_classes=2)   # a new head on the biLM
        """
        if not os.path.isfile(os.path.join(os.fspath(preset), "task.json")):
            return keras_hub.models.Task.from_preset.__func__(cls, os.fspath(preset),
                                                               load_weights=load_weights,
                                                               **kwargs)
        return super().from_preset(preset, load_weights=load_weights, **kwargs)

    def __init__(self, embedding=None, labels=None, tokenizer=None, encoder_units=512,
                 dropout=0.0, word_embedding_dim=0, *, backbone=None, num_classes=None,
                 preprocessor=None, **kwargs):
        tokenizer = self.tokenizer_of(preprocessor, tokenizer)
        if backbone is not None or num_classes is not None:
            embedding, labels = self.from_backbone_arguments(embedding, labels, backbone,
                                                             num_classes)
        outputs = self.check_arguments(embedding, labels, encoder_units, dropout,
                                       regression_allowed=True)
        check_non_negative_int("word_embedding_dim", word_embedding_dim, "0: ELMo alone")
        # === Layers ===
        preprocessor = self.preprocessor_for(embedding, tokenizer, self.input_names,
                                             word_ids=bool(word_embedding_dim))
        encoder = self.sentence_encoder(encoder_units, name="encoder")
        pool = MaskedMaxPooling(name="max_pooling")
        drop = PhiloxDropout(dropout, name="dropout")
        head = keras.layers.Dense(outputs, dtype="float32", name="logits")

        # === Functional Model ===
        features = preprocessor.feature_inputs()
        sentence = pool(encoder(embedding(features["char_ids"])))
        if word_embedding_dim:
            words = BagOfWords(word_embedding_dim, name="bag_of_words")(features["word_ids"])
            sentence = keras.layers.Concatenate(name="with_words")([sentence, words])
        logits = head(drop(sentence))
        super().__init__(inputs=features, outputs=logits, embedding=embedding,
                         preprocessor=preprocessor, labels=labels,
                         encoder_units=encoder_units, dropout=dropout,
                         config={"tokenizer": tokenizer,
                                 "word_embedding_dim": word_embedding_dim}, **kwargs)
        self.tokenizer = tokenizer
        self.word_embedding_dim = word_embedding_dim

    @staticmethod
    def tokenizer_of(preprocessor, tokenizer):
        """The task's tokenizer name: `tokenizer`, or `preprocessor`'s (a `TaskPreprocessor`:
        KerasHub's loader passes the preset's), or whitespace; the two must agree."""
        if preprocessor is None:
            return "whitespace" if tokenizer is None else tokenizer
        if not isinstance(preprocessor, TaskPreprocessor):
            raise TypeError(f"a TextClassifier's preprocessor is a TaskPreprocessor; got a "
                            f"{type(preprocessor).__name__}.")
        given = preprocessor.tokenizer.tokenizer
        if given not in CORE_TOKENIZERS:  # a corpus split with tensorflow-text's
            if tokenizer is None:
                raise ValueError(
                    f"the biLM's corpus was split with {given!r}, which a task model cannot "
                    f"use (its SavedModel serves raw text with core ops only: "
                    f"{list(CORE_TOKENIZERS)}); give tokenizer= one of those to split the "
                    "task's sentences otherwise.")
            return tokenizer
        if tokenizer is not None and tokenizer != given:
            raise ValueError(f"tokenizer={tokenizer!r}, but the preprocessor (the biLM "
                             f"preset's) splits with {given!r}: leave tokenizer out.")
        return given

    @staticmethod
    def from_backbone_arguments(embedding, labels, backbone, num_classes):
        """`(embedding, labels)` from KerasHub's arguments for a classifier: `from_preset(biLM
        preset, num_classes=N)` gives the backbone (its `ElmoEmbedding` made here: a frozen
        biLM, a trained mix, ElmoEmbedding's default dropout); `from_preset(task preset,
        num_classes=N)` the task's own embedding, for a new head. The class names are
        "0" .. "N-1"."""
        if backbone is not None and embedding is not None:
            raise ValueError("give embedding or backbone (KerasHub's), not both.")
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError("a classifier of a backbone (KerasHub's from_preset of a biLM's "
                             "preset) needs num_classes, an integer >= 2; got "
                             f"num_classes={num_classes!r}.")
        return (embedding if backbone is None else ElmoEmbedding(backbone),
                [str(k) for k in range(num_classes)])
