"""`TextClassifier`: a sentence -> class (or score) model on ELMo representations."""

import keras

from elmo_tf.checks import check_non_negative_int
from elmo_tf.layers.bag_of_words import BagOfWords
from elmo_tf.layers.hashed_words import HashedWords
from elmo_tf.layers.masked_max_pooling import MaskedMaxPooling
from elmo_tf.layers.text_tokenizer import TextTokenizer
from elmo_tf.layers.tokens_to_char_ids import TokensToCharIds
from elmo_tf.models.downstream.downstream_task import DownstreamTask, register_task


@register_task
@keras.saving.register_keras_serializable(package="elmo_tf")
class TextClassifier(DownstreamTask):
    """Classifies sentences (GLUE's CoLA, SST-2; sentiment, topics), or scores them (a
    regressor, with `labels=None`).

    Raw sentences `[batch]` are tokenized in the graph (`TextTokenizer`), turned into char
    ids, embedded (`ElmoEmbedding`), run through a BiLSTM (`encoder_units` per direction), max-pooled over
    the real tokens, dropped out and projected to `len(labels)` logits (one score for a
    regressor), the GLUE paper's single-sentence ELMo baseline. With `word_embedding_dim`, the
    mean of word embeddings trained on the task alone (`BagOfWords` of `HashedWords`) is
    concatenated with the pooled vector before the dropout: ELMo beside context-free word
    features, as the ELMo paper's task models use it (what it is worth on small labelled
    sets: `docs/benchmarks.md`, "Fine-tuning defaults").

    Args:
        embedding: an `ElmoEmbedding` (any backbone: ELMo, Masked ELMo).
        labels: the class names, in class-id order; None for a regressor (one output).
        tokenizer: how sentences become tokens, as the biLM's corpus was tokenized
            (`"whitespace"` or `"wordpunct"`).
        encoder_units: the BiLSTM's units per direction.
        dropout: on the pooled sentence vector, in training.
        word_embedding_dim: the size of the bag of task-trained word embeddings; 0 (the
            default) leaves it out: ELMo's representations alone.

    Example:
    >>> embedding = ElmoEmbedding.from_allennlp("options.json", "weights.hdf5")
    >>> model = TextClassifier(embedding, labels=["negative", "positive"])
    >>> model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=["accuracy"])
    >>> model.fit(tf.constant(["a fine film .", "dull ."]), tf.constant([1, 0]), epochs=3)
    """

    task_name = "classify"  # plain files: label<TAB>text
    input_names = ("text",)
    finetune_options = {"word_embedding_dim": 64}  # measured: docs/benchmarks.md

    def __init__(self, embedding, labels=None, tokenizer="whitespace", encoder_units=512,
                 dropout=0.0, word_embedding_dim=0, **kwargs):
        outputs = self.check_arguments(embedding, labels, encoder_units, dropout,
                                       regression_allowed=True)
        # === Layers ===
        tokenize = TextTokenizer(tokenizer, name="tokenizer")
        char_ids = TokensToCharIds(embedding.backbone.max_characters_per_token,
                                   name="char_ids")
        encoder = self.sentence_encoder(encoder_units, name="encoder")
        pool = MaskedMaxPooling(name="max_pooling")
        drop = keras.layers.Dropout(dropout, name="dropout")
        head = keras.layers.Dense(outputs, dtype="float32", name="logits")
        check_non_negative_int("word_embedding_dim", word_embedding_dim, "0: ELMo alone")

        # === Functional Model ===
        text = keras.Input(shape=(), dtype="string", name="text")
        tokens = tokenize(text)
        features = {"char_ids": char_ids(tokens)}  # the string ops end here
        sentence = pool(encoder(embedding(features["char_ids"])))
        if word_embedding_dim:
            features["word_ids"] = HashedWords(name="word_ids")(tokens)
            words = BagOfWords(word_embedding_dim, name="bag_of_words")(features["word_ids"])
            sentence = keras.layers.Concatenate(name="with_words")([sentence, words])
        logits = head(drop(sentence))
        super().__init__(inputs=text, outputs=logits, embedding=embedding, labels=labels,
                         encoder_units=encoder_units, dropout=dropout,
                         config={"tokenizer": tokenizer,
                                 "word_embedding_dim": word_embedding_dim},
                         features=features, **kwargs)
        self.tokenizer = tokenizer
        self.word_embedding_dim = word_embedding_dim
