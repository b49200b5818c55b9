"""CoNLL-style token/tag files: one token per line with its columns separated by whitespace,
a blank line between sentences, `-DOCSTART-` lines (CoNLL-2003's document markers) skipped."""

import os

from elmo_tf.files import utf8_lines


def read_conll(path, tag_column=-1):
    """The sentences of a CoNLL-style file.

    Args:
        path: the file (UTF-8).
        tag_column: the column of the tag (default the last, as in CoNLL-2000 chunking,
            CoNLL-2003 NER and the Penn Treebank's `word POS` files); the token is column 0.

    Returns:
        `(tokens, tags)`: two lists with one list of strings per sentence.

    Raises:
        ValueError: naming the file and line, for a line without the tag column or a file with
            no sentence. FileNotFoundError naming the file.

    Example:
    >>> tokens, tags = read_conll("train.txt")   # "EU NNP B-NP B-ORG" per line
    >>> tokens[0][:2], tags[0][:2]
    (['EU', 'rejects'], ['B-ORG', 'O'])
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no CoNLL file {path}.")
    needed = tag_column + 1 if tag_column >= 0 else 2
    tokens, tags, sentence = [], [], ([], [])

    def end_sentence():
        nonlocal sentence
        if sentence[0]:
            tokens.append(sentence[0])
            tags.append(sentence[1])
        sentence = ([], [])

    for number, line in enumerate(utf8_lines(path), start=1):
        fields = line.split()
        if not fields:
            end_sentence()
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if len(fields) < needed:
            raise ValueError(
                f"{path}, line {number}: {len(fields)} column(s); a CoNLL line holds the "
                f"token, then its tag in column {tag_column + 1 if tag_column >= 0 else 'N'}"
                f" ({'the last' if tag_column < 0 else 'counting from 1'}), separated by "
                "whitespace; sentences are separated by blank lines.")
        sentence[0].append(fields[0])
        sentence[1].append(fields[tag_column])
    end_sentence()
    if not tokens:
        raise ValueError(f"{path} holds no sentence (expected a token and its tag per line).")
    return tokens, tags
