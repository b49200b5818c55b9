"""`DownstreamTask`: what the downstream task models share, and the registry of them by the
name `elmo-tf finetune --task` gives them."""

import os

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from elmo_tf.data.labelled_text import read_labelled_text
from elmo_tf.keras_compat import AnyBackboneOf
from elmo_tf.metrics import scores
from elmo_tf.models.backbone import Backbone
from elmo_tf.models.char_ids_tokenizer import CharIdsTokenizer
from elmo_tf.models.downstream.task_preprocessor import TaskPreprocessor
from elmo_tf.models.elmo_embedding import ElmoEmbedding
from elmo_tf.models.family import family_for_backbone
from elmo_tf.models.task import Task
from elmo_tf.text.tokenizers import CORE_TOKENIZERS

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


class DownstreamTask(Task):
    """Base of the downstream task models (`TextClassifier`, `SentencePairClassifier`,
    `SequenceTagger`): KerasHub tasks on ELMo representations. A mixin, first among a task's
    bases, before its KerasHub class (`class MyTask(DownstreamTask, keras_hub.models.Task)`,
    or `keras_hub.models.TextClassifier`): Keras rewrites the bases of a functional model's
    classes once per path to `keras.Model`, so the KerasHub class must be reachable once. As
    in KerasHub, a task is two parts:

    * its `preprocessor` (`TaskPreprocessor`, a `keras_hub.models.Preprocessor`): raw text ->
      features (int32 char ids of each text, a classifier's hashed word ids), the string ops,
      run in the input pipeline: `fit`, `predict` and `evaluate` map it over text they are
      given (features pass as they are);
    * the model itself, a functional model from the features to logits: an `ElmoEmbedding` (a
      frozen biLM and a trainable scalar mix by default; the whole biLM with the embedding's
      `fine_tune=True`) and a head. Numbers only, so it compiles with XLA
      (`compile(..., xla="on")`, under any strategy: `CompiledStep`). A feature's time axis
      may be right-padded with 0 beyond its longest text: the logits of the real tokens, and
      the loss, are the same.

    Calling the model on text is KerasHub's error: `model(model.preprocessor(texts))`.

    The default heads follow the GLUE paper's ELMo baselines (Wang et al. 2018): a BiLSTM over
    the ELMo vectors (`encoder_units` per direction; Keras's LSTM, so cuDNN on a GPU), max-pooled
    over the real tokens for sentence tasks. Outputs are logits (float32 under any policy).

    The class names (`labels`) are part of the model, so a loaded model predicts names. A task
    takes any elmo-tf backbone (`backbone_cls` matches every `Backbone` subclass), so that
    KerasHub's `keras_hub.models.TextClassifier.from_preset(dir)` finds it for either family.

    A task owns everything `elmo-tf finetune`, `predict` and the task export do with it, so that
    a new task is one file and a `register_task`: its plain files (`read_examples`,
    `prepare_labels`, `metrics_for`), its inputs (`input_names`, `inputs_for`, `parse_lines`),
    its targets and loss (`targets`, `task_loss`), and what its logits mean (`scores`,
    `decode`, and in the served graph `serving_outputs`, `serving_function`). The defaults here
    are a classifier's (or a regressor's, with `labels=None`) over `input_names` texts.

    Example:
    >>> model = task_class("classify").create(embedding, ["negative", "positive"],
    ...                                       "whitespace", encoder_units=64, dropout=0.5)
    >>> model.decode(model.predict(model.inputs_for([("a fine film .",)]))[0], None)
    'positive'
    >>> model(model.preprocessor(tf.constant(["a fine film ."]))).shape
    TensorShape([1, 2])
    """

    backbone_cls = AnyBackboneOf(Backbone)
    task_name = None  # the name finetune gives plain files of this task
    input_names = ("text",)  # the model's string inputs, `[batch]` each
    fixed_tokenizer = None  # the tokenizer its inputs need, whatever the biLM's corpus had
    # The constructor's own options that `elmo-tf finetune` sets, with their defaults there.
    finetune_options = {}

    def __init__(self, *, inputs, outputs, embedding, preprocessor, labels, encoder_units,
                 dropout, config, **kwargs):
        # === Config === (before Keras's init, which reads some of them)
        self.embedding = embedding
        self.preprocessor = preprocessor
        self.labels = None if labels is None else [str(label) for label in labels]
        self.encoder_units = int(encoder_units)
        self.dropout = float(dropout)
        self._task_config = config
        # Uncompiled, as a Keras model is (KerasHub's tasks compile themselves): a loaded
        # task has no optimizer to warn about; `compile()` with no argument: Adam, the loss.
        super().__init__(inputs=inputs, outputs=outputs, compile=False, **kwargs)

    def save_to_preset(self, preset_dir, max_shard_size=10):
        """Writes the task as a KerasHub preset (KerasHub's writer: `task.json` and
        `task.weights.h5`, the head and the mix; the backbone's `config.json`,
        `model.weights.h5` and `metadata.json`; `preprocessor.json` and `tokenizer.json`),
        without optimizer state, each file whole or not at all (`Backbone.save_to_preset`):
        `keras_hub.models.TextClassifier.from_preset(dir)` (a classifier) and
        `DownstreamTask.from_preset(dir)` (any task) load it after `import elmo_tf`.

        Args:
            preset_dir: the directory (created if need be; other files in it are kept).
            max_shard_size: as KerasHub's: weights over this many GB are sharded.

        Example:
        >>> classifier.save_to_preset("sentiment")
        >>> keras_hub.models.TextClassifier.from_preset("sentiment").predict(texts)
        """
        from elmo_tf.files import variables_bytes, write_files_atomically
        from elmo_tf.keras_compat import without_optimizer

        def write(staging):
            with without_optimizer(self):
                keras_hub.models.Task.save_to_preset(self, staging, max_shard_size)

        write_files_atomically(preset_dir, write, last=("config.json", "task.json"),
                               needed_bytes=2 * variables_bytes(self.weights) + 2**20)

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """The task of a preset that `save_to_preset` (or `elmo-tf finetune`) wrote, whatever
        its class (KerasHub's loader on the class `task.json` names, which must be `cls` or a
        subclass of it); `load_weights=False` leaves its weights fresh.

        Example:
        >>> model = DownstreamTask.from_preset("runs/sst2")   # a TextClassifier
        """
        from elmo_tf.files import read_json

        preset = os.fspath(preset)
        config_file = os.path.join(preset, "task.json")
        if not os.path.isfile(config_file):
            raise FileNotFoundError(f"{preset} holds no task preset (no task.json): "
                                    "save_to_preset, or elmo-tf finetune once it has ended, "
                                    "writes one.")
        name = read_json(config_file).get("registered_name")
        task = keras.saving.get_registered_object(name)
        if not (isinstance(task, type) and issubclass(task, cls)):
            raise ValueError(f"{preset}'s task.json holds a {name!r}, not a {cls.__name__} "
                             "(import the package that registers it?).")
        return keras_hub.models.Task.from_preset.__func__(task, preset,
                                                           load_weights=load_weights, **kwargs)

    @staticmethod
    def preprocessor_for(embedding, tokenizer, input_names, word_ids=False):
        """The `TaskPreprocessor` of a task on `embedding`: its backbone family's tokenizer
        (`CharIdsTokenizer` for a backbone of no registered family, or of one without its own;
        `tokenizer`: `"whitespace"`, `"wordpunct"`, ...) with the backbone's characters per
        token."""
        if tokenizer not in CORE_TOKENIZERS:
            raise ValueError(f"a task model's tokenizer must be one of {list(CORE_TOKENIZERS)} "
                             "(core TensorFlow ops, so that its SavedModel serves raw text); "
                             f"got {tokenizer!r}.")
        try:
            tokenizer_class = family_for_backbone(embedding.backbone).tokenizer_class
        except ValueError:  # any backbone that keeps the contract: the generic tokenizer
            tokenizer_class = None
        tokenizer_class = tokenizer_class or CharIdsTokenizer
        return TaskPreprocessor(
            tokenizer_class(tokenizer, embedding.backbone.max_characters_per_token),
            input_names=input_names, word_ids=word_ids, name="preprocessor")

    @property
    def backbone(self):
        """The biLM the task's embedding mixes."""
        return self.embedding.backbone

    @property
    def _backbone(self):  # KerasHub's Task reads it
        return self.embedding.backbone

    def compile(self, optimizer="auto", loss="auto", *, metrics=None, **kwargs):
        """Keras's `compile` (and `xla`: `CompiledStep.compile`), with `"auto"` as KerasHub's
        tasks have it: here Adam at 1e-3 (`finetune`'s default, not KerasHub's 5e-5: the head
        trains from scratch) and the task's loss (`task_loss`); no metrics by default.

        Example:
        >>> model.compile(xla="on")   # Adam, the task's loss, each replica's step compiled
        """
        optimizer = keras.optimizers.Adam(1e-3) if optimizer == "auto" else optimizer
        loss = self.task_loss() if loss == "auto" else loss
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """KerasHub's hook in `fit`, `predict`, `evaluate`: text goes through the
        preprocessor, features (no strings) pass as they are."""
        if any(_is_text(t) for t in tf.nest.flatten(x)):
            return super().preprocess_samples(x, y, sample_weight)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def replica_gradients(self, gradients, variables):
        # Compiled under a strategy (`CompiledStep`), the replicas' shares of a batch differ in
        # tokens (and rows, in a last smaller batch), so a word table's row-sparse gradients
        # differ in rows, and compiled their shapes are static: the all-gather of sparse
        # gradients across replicas needs them equal. Summed dense instead (Keras's Adam
        # moves every row anyway).
        if tf.distribute.get_strategy().num_replicas_in_sync == 1:
            return gradients
        return [tf.reshape(tf.convert_to_tensor(g), v.shape)
                if isinstance(g, tf.IndexedSlices) else g for g, v in zip(gradients, variables)]

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

        # With AutoGraph: `serving_outputs` may be a user's task's, converted as a user's
        # function is (only this small one of elmo-tf's is: `trace_without_autograph`).
        @tf.function(input_signature=specs, autograph=True)
        def serve(*texts):
            texts = [tf.ensure_shape(t, [None], name=name)
                     for t, name in zip(texts, self.input_names)]
            inputs = texts[0] if len(texts) == 1 else dict(zip(self.input_names, texts))
            return self.serving_outputs(texts[0], self(self.preprocessor(inputs),
                                                      training=False))

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


def _is_text(value):
    """Whether `value` holds strings (a string tensor, a NumPy array of strings, a string)."""
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "USO"
    return tf.is_tensor(value) and value.dtype == tf.string


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
