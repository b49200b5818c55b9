"""The GLUE tasks' TSV files, as GLUE's download script distributes them, read into examples.

Each task keeps its own layout (`GLUE_TASKS`): which columns hold the text(s) and the label,
whether the first line is a header, the label's values and the task's metrics. Fields are
split on tabs only: GLUE's files are not quoted (a `"` is part of the text), as GLUE's own
readers (`csv.QUOTE_NONE`) treat them. Test files have no labels.
"""

import dataclasses
import os

from elmo_tf.files import utf8_lines


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task's files and what they hold.

    Args:
        directory: the task's directory in GLUE's distribution (`CoLA`, `SST-2`, ...).
        header: whether each file starts with a header line.
        text_columns: the column(s) of the text (one: a single-sentence task; two: a pair).
        label_column: the column of the label in training and dev files.
        labels: the label values, in class-id order; None for a regression (STS-B's scores).
        metrics: the task's metrics, the first being its main one: names of functions of
            `elmo_tf.metrics.scores`.
        dev_files: the dev split(s), by name.
        test_text_columns: the text column(s) in the test file (it has an index column first).
    """

    directory: str
    header: bool
    text_columns: tuple
    label_column: int
    labels: tuple
    metrics: tuple
    dev_files: dict
    test_text_columns: tuple

    @property
    def is_pair(self):
        return len(self.text_columns) == 2


_DEV = {"dev": "dev.tsv"}
GLUE_TASKS = {
    "cola": GlueTask("CoLA", False, (3,), 1, ("0", "1"), ("matthews_correlation",), _DEV, (1,)),
    "sst2": GlueTask("SST-2", True, (0,), 1, ("0", "1"), ("accuracy",), _DEV, (1,)),
    "mrpc": GlueTask("MRPC", True, (3, 4), 0, ("0", "1"), ("f1", "accuracy"), _DEV, (3, 4)),
    "qqp": GlueTask("QQP", True, (3, 4), 5, ("0", "1"), ("f1", "accuracy"), _DEV, (1, 2)),
    "stsb": GlueTask("STS-B", True, (7, 8), 9, None, ("pearson", "spearman"), _DEV, (7, 8)),
    "mnli": GlueTask("MNLI", True, (8, 9), -1, ("contradiction", "entailment", "neutral"),
                     ("accuracy",), {"dev_matched": "dev_matched.tsv",
                                     "dev_mismatched": "dev_mismatched.tsv"}, (8, 9)),
    "qnli": GlueTask("QNLI", True, (1, 2), 3, ("entailment", "not_entailment"), ("accuracy",),
                     _DEV, (1, 2)),
    "rte": GlueTask("RTE", True, (1, 2), 3, ("entailment", "not_entailment"), ("accuracy",),
                    _DEV, (1, 2)),
    "wnli": GlueTask("WNLI", True, (1, 2), 3, ("0", "1"), ("accuracy",), _DEV, (1, 2)),
}


def glue_splits(task):
    """The split names of `task`: `train`, its dev split(s), and `test` (`test_matched` and
    `test_mismatched` for MNLI)."""
    spec = _task(task)
    tests = ["test_matched", "test_mismatched"] if task == "mnli" else ["test"]
    return ["train", *spec.dev_files, *tests]


def read_glue(task, data_dir, split):
    """The examples of one split of a GLUE task.

    Args:
        task: a key of `GLUE_TASKS` (`"sst2"`, `"mnli"`, ...).
        data_dir: the directory that holds the task's directory (`data_dir/SST-2/train.tsv`),
            or the task's directory itself.
        split: one of `glue_splits(task)`.

    Returns:
        `(texts, labels)`: `texts` a list of 1-tuples (single-sentence tasks) or 2-tuples (pair
        tasks) of strings; `labels` a list of class ids (an index into the task's `labels`),
        floats for STS-B, or None for a test split.

    Raises:
        ValueError: naming the file and line, for a line with too few columns or a label the
            task does not have. FileNotFoundError naming the file that is missing.

    Example:
    >>> texts, labels = read_glue("sst2", "glue_data", "dev")
    >>> texts[0], labels[0]
    (("it 's a charming and often affecting journey . ",), 1)
    """
    spec = _task(task)
    splits = glue_splits(task)
    if split not in splits:
        raise ValueError(f"GLUE {task} has the splits {splits}; got {split!r}.")
    directory = os.fspath(data_dir)
    if not os.path.isdir(os.path.join(directory, spec.directory)) and \
            os.path.basename(os.path.normpath(directory)) == spec.directory:
        directory = os.path.dirname(os.path.normpath(directory))
    name = spec.dev_files.get(split, f"{split}.tsv")
    path = os.path.join(directory, spec.directory, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"GLUE {task}: no {path} (expected GLUE's layout: "
                                f"DATA_DIR/{spec.directory}/{name}).")
    test = split.startswith("test")
    columns = spec.test_text_columns if test else spec.text_columns
    # A label in the last column (MNLI) comes after the texts.
    label = -1 if test else (spec.label_column if spec.label_column >= 0 else max(columns) + 1)
    needed = max(*columns, label) + 1
    texts, labels = [], []
    for number, line in enumerate(utf8_lines(path), start=1):
        if (number == 1 and (spec.header or test)) or not line:
            continue
        fields = line.split("\t")
        if len(fields) < needed:
            raise ValueError(
                f"{path}, line {number}: {len(fields)} tab-separated columns; GLUE {task} "
                f"{'test' if test else 'train/dev'} lines have at least {needed} "
                f"({_describe(spec, test)}).")
        texts.append(tuple(fields[c] for c in columns))
        if not test:
            labels.append(_label(spec, fields[spec.label_column], path, number, task))
    return texts, (None if test else labels)


# The text features of TFDS's `glue/NAME` datasets, in text_a, text_b order.
_TFDS_TEXTS = {"cola": ("sentence",), "sst2": ("sentence",), "mrpc": ("sentence1", "sentence2"),
               "qqp": ("question1", "question2"), "stsb": ("sentence1", "sentence2"),
               "mnli": ("premise", "hypothesis"), "qnli": ("question", "sentence"),
               "rte": ("sentence1", "sentence2"), "wnli": ("sentence1", "sentence2")}


def read_glue_tfds(task, tfds_data_dir, split):
    """`read_glue`'s examples from TFDS's `glue/NAME` dataset prepared in `tfds_data_dir`
    (never downloaded: prepare it offline first, e.g. `tfds.builder("glue/sst2",
    data_dir=D).download_and_prepare(download_config=tfds.download.DownloadConfig(
    manual_dir=M))` with GLUE's `SST-2.zip` in M). Splits are named as in `read_glue`
    (`dev` is TFDS's `validation`); class ids are this module's (`GLUE_TASKS[task].labels`):
    TFDS's ids are mapped by name where the names differ in order (MNLI).

    Example:
    >>> texts, labels = read_glue_tfds("mnli", "~/tensorflow_datasets", "dev_matched")
    """
    spec = _task(task)
    splits = glue_splits(task)
    if split not in splits:
        raise ValueError(f"GLUE {task} has the splits {splits}; got {split!r}.")
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError("reading GLUE from TFDS needs tensorflow-datasets: "
                          "pip install -e '.[data]'") from error
    builder = tfds.builder(f"glue/{task}", data_dir=tfds_data_dir)
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"TFDS dataset glue/{task} is not prepared in {tfds_data_dir} (looked for "
            f"{builder.data_dir}); prepare it offline first (see read_glue_tfds), or read "
            "GLUE's own files with read_glue. Nothing is downloaded here.")
    label_feature = builder.info.features["label"]
    names = getattr(label_feature, "names", None)  # None for STS-B's scores
    if spec.labels is None or names is None or spec.labels == ("0", "1"):
        to_ours = None  # the same ids (TFDS's binary names are in GLUE's 0/1 order)
    else:
        to_ours = [spec.labels.index(name) for name in names]
    texts, labels = [], []
    tfds_split = split.replace("dev", "validation")
    for example in tfds.as_numpy(builder.as_dataset(split=tfds_split, shuffle_files=False)):
        texts.append(tuple(example[f].decode("utf-8") for f in _TFDS_TEXTS[task]))
        label = example["label"]
        if spec.labels is None:
            labels.append(float(label))
        else:
            labels.append(int(label) if to_ours is None else to_ours[int(label)])
    test = split.startswith("test")  # TFDS's test labels are -1: none
    return texts, (None if test else labels)


def _task(task):
    if task not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {', '.join(GLUE_TASKS)}.")
    return GLUE_TASKS[task]


def _describe(spec, test):
    columns = spec.test_text_columns if test else spec.text_columns
    parts = [f"text in column {c + 1}" for c in columns]
    if not test:
        parts.append("the label in the last column" if spec.label_column < 0
                     else f"the label in column {spec.label_column + 1}")
    return ", ".join(parts)


def _label(spec, value, path, number, task):
    if spec.labels is None:
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{path}, line {number}: label {value!r} is not a number; GLUE "
                             f"{task}'s labels are scores from 0 to 5.") from None
    if value not in spec.labels:
        raise ValueError(f"{path}, line {number}: label {value!r}; GLUE {task}'s labels are "
                         f"{list(spec.labels)}.")
    return spec.labels.index(value)
