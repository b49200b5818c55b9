"""`DownstreamTask`: what the downstream task models share, and the registry of them by the
name `elmo-tf finetune --task` gives them."""

import types

import keras
import numpy as np
import tensorflow as tf

from elmo_tf.data.labelled_text import read_labelled_text
from elmo_tf.keras_compat import FitWorkarounds
from elmo_tf.metrics import scores
from elmo_tf.models.compiled_step import CompiledStep
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.models.task import Task

_TASKS = {}


def register_task(cls):
    """Class decorator: makes a `DownstreamTask` subclass known by its `task_name`, for
    `elmo-tf finetune --task NAME` on plain files."""
    if cls.task_name in _TASKS:
        raise ValueError(f"a downstream task named {cls.task_name!r} is already registered "
                         f"({_TASKS[cls.task_name].__name__}).")
    _TASKS[cls.task_name] = cls
    return cls


def task_names():
    """The registered downstream tasks' names (`classify`, `pair`, `tag`, ...)."""
    return tuple(_TASKS)


def task_class(name):
    """The `DownstreamTask` subclass registered as `name`."""
    if name not in _TASKS:
        raise ValueError(f"unknown downstream task {name!r}; registered: {list(_TASKS)}.")
    return _TASKS[name]


class DownstreamTask(Task, keras.Model):
    """Base of the downstream task models (`TextClassifier`, `SentencePairClassifier`,
    `SequenceTagger`): functional models that read raw text, tokenize it in the graph
    (`TextTokenizer`), turn the tokens into char ids (`TokensToCharIds`), embed them with an
    `ElmoEmbedding` (a frozen biLM and a trainable scalar mix by default; the whole biLM with
    the embedding's `fine_tune=True`) and run a head. The string ops come first and end in the
    model's features, so the model splits in two (`split()`): a preprocessor (text -> features,
    for the input pipeline) and a numeric part (features -> logits, compiled with XLA by
    `finetune` on GPUs).

    The default heads follow the GLUE paper's ELMo baselines (Wang et al. 2018): a BiLSTM over
    the ELMo vectors (`encoder_units` per direction; Keras's LSTM, so cuDNN on a GPU), max-pooled
    over the real tokens for sentence tasks. Outputs are logits (float32 under any policy).

    The class names (`labels`) are part of the model, so a loaded model predicts names.

    A task owns everything `elmo-tf finetune`, `predict` and the task export do with it, so that
    a new task is one file and a `register_task` (and, to train with XLA, its `features`):
    its plain files (`read_examples`,
    `prepare_labels`, `metrics_for`), its inputs (`input_names`, `inputs_for`, `parse_lines`),
    its targets and loss (`targets`, `task_loss`), and what its logits mean (`scores`,
    `decode`, and in the served graph `serving_outputs`, `serving_function`). The defaults here
    are a classifier's (or a regressor's, with `labels=None`) over `input_names` texts.

    Example:
    >>> model = task_class("classify").create(embedding, ["negative", "positive"],
    ...                                       "whitespace", encoder_units=64, dropout=0.5)
    >>> model.decode(model.predict(model.inputs_for([("a fine film .",)]))[0], None)
    'positive'
    """

    task_name = None  # the name finetune gives plain files of this task
    input_names = ("text",)  # the model's string inputs, `[batch]` each
    fixed_tokenizer = None  # the tokenizer its inputs need, whatever the biLM's corpus had
    # The constructor's own options that `elmo-tf finetune` sets, with their defaults there.
    finetune_options = {}

    def __init__(self, *, embedding, labels, encoder_units, dropout, config, features=None,
                 **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.embedding = embedding
        self.labels = None if labels is None else [str(label) for label in labels]
        self.encoder_units = int(encoder_units)
        self.dropout = float(dropout)
        self._task_config = config
        for name, tensor in (features or {}).items():  # the numeric part's inputs, by name
            tensor.name = name
        # The graph's split between string ops and numbers: `features` are the symbolic
        # tensors the string ops end in (char ids, word ids); None for a task that does not
        # say (it trains without XLA). Kept in a plain namespace: not tracked, not saved (the
        # parts are rebuilt from the graph).
        self._split = types.SimpleNamespace(features=features, preprocessor=None,
                                            numeric=None)

    def split(self):
        """`(preprocessor, numeric)`, the model's two parts (built once, sharing its layers and
        weights; methods, not attributes, so that saving walks neither):

        * `preprocessor`, a `keras.Model`: the model's raw inputs -> `{name: features}` (int32
          char ids `[batch, time, 50]` of each text, and a classifier's hashed word ids
          `[batch, time]`): the string ops, for a `tf.data` pipeline;
        * `numeric`: the features -> logits, every layer after the string ops, so it compiles
          with XLA (`compile(..., xla="on")`, under any strategy: `CompiledStep`). A feature's
          time axis may be right-padded with 0 beyond its longest text: the logits of the real
          tokens, and the loss, are the same.

        `model(x)` is `numeric(preprocessor(x))`.

        Example:
        >>> preprocessor, numeric = model.split()
        >>> numeric(preprocessor(tf.constant(["a fine film ."]))).shape
        TensorShape([1, 2])
        """
        if self._split.features is None:
            raise ValueError(f"{type(self).__name__} does not say where its string ops end: "
                             "pass its features (`{name: symbolic tensor}`, the char ids its "
                             "embedding reads) to DownstreamTask.__init__ to train it with XLA "
                             "(finetune --xla off trains it without).")
        if self._split.numeric is None:
            features = self._split.features
            self._split.preprocessor = keras.Model(self.input, features,
                                                   name=f"{self.name}_preprocessor")
            self._split.numeric = _NumericPart(inputs=features, outputs=self.output,
                                               name=f"{self.name}_numeric")
        return self._split.preprocessor, self._split.numeric

    @property
    def backbone(self):
        """The biLM the task's embedding mixes."""
        return self.embedding.backbone

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

    # --- fine-tuning on plain files ------------------------------------------------------
    @classmethod
    def create(cls, embedding, labels, tokenizer, encoder_units, dropout, **options):
        """The model `elmo-tf finetune` trains: `labels` the class names (None: a regressor),
        `tokenizer` how raw text becomes tokens, `options` those of `finetune_options`."""
        return cls(embedding, labels=labels, tokenizer=tokenizer, encoder_units=encoder_units,
                   dropout=dropout, **options)

    @classmethod
    def read_examples(cls, path, header=False):
        """`(texts, labels)` of a plain file: a text is a tuple of strings, one per input;
        a label as written (here `label<TAB>text...`, `read_labelled_text`; `header`: its
        first line is a header, skipped)."""
        return read_labelled_text(path, pairs=len(cls.input_names) == 2, header=header)

    @classmethod
    def prepare_labels(cls, train_labels, dev_labels, train_path, dev_path):
        """`(names, train_ids, dev_ids)`: the label names (sorted) and the examples' label ids;
        too few labels, or a dev label the training file lacks, is a ValueError naming the
        file."""
        names = sorted(set(train_labels))
        if len(names) < 2:
            raise ValueError(f"{train_path} has one label ({names[0]!r}); a classifier needs two "
                             "or more.")
        check_known_labels(dev_path, set(dev_labels), names, "labels")
        index = {label: i for i, label in enumerate(names)}
        return names, [index[x] for x in train_labels], [index[x] for x in dev_labels]

    @classmethod
    def metrics_for(cls, names):
        """The task's metrics for these label names, the first being its main one (names of
        `elmo_tf.metrics.scores` functions)."""
        return ["accuracy", "f1"] if len(names) == 2 else ["accuracy"]

    # --- inputs, targets, loss -------------------------------------------------------------
    def inputs_for(self, texts):
        """The model's inputs for `texts` (tuples of strings, one per input; or strings for a
        one-input task), as string tensors."""
        columns = list(zip(*[(t,) if isinstance(t, str) else tuple(t) for t in texts])) or \
            [()] * len(self.input_names)
        tensors = [tf.constant(list(c), tf.string, shape=[len(texts)]) for c in columns]
        return tensors[0] if len(tensors) == 1 else dict(zip(self.input_names, tensors))

    def parse_lines(self, lines, first_line=1):
        """The texts of `predict`'s input lines: one text per line (`text_a<TAB>text_b` for two
        inputs); `first_line`: the number of the first line, for errors."""
        if len(self.input_names) == 1:
            return [(line,) for line in lines]
        texts = [tuple(line.split("\t")) for line in lines]
        bad = [n for n, fields in enumerate(texts, start=first_line)
               if len(fields) != len(self.input_names)]
        if bad:
            raise ValueError(f"line {bad[0]}: this model reads "
                             f"{'<TAB>'.join(self.input_names)} per line.")
        return texts

    def targets(self, labels):
        """The training targets of label ids (or scores) as a tensor (ragged for sequences)."""
        if self.labels is None:
            return tf.constant(labels, tf.float32)
        return tf.constant(labels, tf.int32)

    def task_loss(self):
        """The loss `fit` trains with."""
        if self.labels is None:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    # --- what the logits mean --------------------------------------------------------------
    def scores(self, logits, gold, metrics):
        """`{metric: score}` of the rows of `logits` (one array per example) against the gold
        label ids (scores)."""
        logits = np.stack(logits)
        predicted = logits[:, 0] if self.labels is None else logits.argmax(-1)
        return {m: getattr(scores, m)(np.asarray(gold), predicted) for m in metrics}

    def decode(self, logits, text, scores=False):
        """The prediction for one example, as `predict` prints it: the label name, or the score
        of a regressor. With `scores`, a classifier's label is followed by every class's
        probability, `<TAB>name=p` in the labels' order."""
        if self.labels is None:
            return f"{float(logits[0]):.6g}"
        label = self.labels[int(logits.argmax())]
        if not scores:
            return label
        return "\t".join([label] + [f"{name}={p:.4f}" for name, p in
                                     zip(self.labels, _softmax(logits))])

    def serving_outputs(self, texts, logits):
        """The served outputs, in the graph: `logits` and the prediction by name (`label`
        strings `[batch]`, or `score` float32 `[batch]` for a regressor). `texts`: the first
        input."""
        if self.labels is None:
            return {"logits": logits, "score": logits[:, 0]}
        return {"logits": logits, "label": tf.gather(tf.constant(self.labels),
                                                     tf.argmax(logits, -1))}

    def serving_function(self):
        """The `serving_default` signature: raw strings `[batch]` per input name in, the
        `serving_outputs` out; an input of another rank is an INVALID_ARGUMENT error naming
        it."""
        specs = [tf.TensorSpec([None], tf.string, name=name) for name in self.input_names]

        @tf.function(input_signature=specs)
        def serve(*texts):
            texts = [tf.ensure_shape(t, [None], name=name)
                     for t, name in zip(texts, self.input_names)]
            inputs = texts[0] if len(texts) == 1 else dict(zip(self.input_names, texts))
            return self.serving_outputs(texts[0], self(inputs, training=False))

        return serve

    # --- Keras serialization -------------------------------------------------------------
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


class _NumericPart(FitWorkarounds, CompiledStep, keras.Model):
    """A task model's numeric part (`DownstreamTask.split`): a functional model on the
    layers after the string ops, trained with XLA per replica as every task is."""

    def replica_gradients(self, gradients, variables):
        # The replicas' shares of a batch differ in tokens (and rows, in a last smaller
        # batch), so a word table's row-sparse gradients differ in rows, and compiled their
        # shapes are static: the all-gather of sparse gradients across replicas needs them
        # equal. Summed dense instead (Keras's Adam moves every row anyway).
        if tf.distribute.get_strategy().num_replicas_in_sync == 1:
            return gradients
        return [tf.reshape(tf.convert_to_tensor(g), v.shape)
                if isinstance(g, tf.IndexedSlices) else g for g, v in zip(gradients, variables)]


def _softmax(logits):
    """Probabilities of float logits along the last axis (NumPy)."""
    logits = np.asarray(logits, np.float64)
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def check_known_labels(path, found, names, what):
    """A ValueError naming `path` when `found` holds labels (or tags) not among `names`."""
    unknown = sorted(found - set(names))
    if unknown:
        hint = "; a header line? --header skips it" if what == "labels" else ""
        raise ValueError(f"{path} has {what} the training file does not have: {unknown[:5]} "
                         f"(training {what}: {names[:20]}{hint}).")
