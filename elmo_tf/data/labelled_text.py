"""Plain labelled text: `label<TAB>text` (classification) or `label<TAB>text_a<TAB>text_b`
(sentence pairs), one example per line."""

import os

from elmo_tf.files import utf8_lines


def read_labelled_text(path, pairs=False, header=False):
    """The examples of a `label<TAB>text` (or, with `pairs`, `label<TAB>text_a<TAB>text_b`)
    file. Blank lines are skipped; the label and texts are kept as written (a label is any
    string; a text keeps its spaces, and is tokenized later).

    Args:
        path: the file (UTF-8).
        pairs: whether each line holds a pair of texts.
        header: the first (non-blank) line is a header (`label<TAB>sentence`): skipped.

    Returns:
        `(texts, labels)`: `texts` a list of 1-tuples (or 2-tuples) of strings, `labels` a
        list of strings.

    Raises:
        ValueError: naming the file and line, for a line with another number of tab-separated
            fields, or an empty label. FileNotFoundError naming the file.

    Example:
    >>> texts, labels = read_labelled_text("train.tsv")   # "positive\\tA fine film ."
    >>> texts[0], labels[0]
    (('A fine film .',), 'positive')
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no labelled-text file {path}.")
    expected = 3 if pairs else 2
    layout = "label<TAB>text_a<TAB>text_b" if pairs else "label<TAB>text"
    texts, labels = [], []
    for number, line in enumerate(utf8_lines(path), start=1):
        if not line.strip():
            continue
        if header:
            header = False
            continue
        fields = line.split("\t")
        if len(fields) != expected or not fields[0].strip():
            empty = " with an empty label" if not fields[0].strip() else ""
            raise ValueError(f"{path}, line {number}: {len(fields)} tab-separated "
                             f"field(s){empty}; expected {layout}.")
        labels.append(fields[0].strip())
        texts.append(tuple(fields[1:]))
    if not labels:
        raise ValueError(f"{path} holds no example (expected {layout} per line).")
    return texts, labels
