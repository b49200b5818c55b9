"""Word vocabularies in bilm-tf's file format (`elmo_tf.data.build_vocabulary` builds one from
a corpus).

A vocabulary file lists one token per line, UTF-8, and contains `<S>`, `</S>` and `<UNK>`
(`docs/conventions.md` §6). As in bilm-tf's README, the specials come first and the
words follow by descending corpus frequency: the training softmax samples negatives with TF's
log-uniform (Zipfian) candidate sampler, which assumes that a smaller id means a more frequent word.

Example:
>>> vocab = build_vocabulary("news.en-*", min_count=3)   # same tokens as read_corpus(...)
>>> vocab.save("vocab.txt")
>>> Vocabulary.load("vocab.txt").lookup(tf.constant(["the", "qwzx"]))
<tf.Tensor: shape=(2,), dtype=int32, numpy=array([3, 2], dtype=int32)>
"""

import re

import tensorflow as tf

from elmo_tf.files import write_atomically

_SEPARATOR = re.compile(r"[ \t]+")
_COUNT = re.compile(r"[0-9]+")


class Vocabulary:
    """An ordered list of unique tokens; a token's id is its index.

    Args:
        tokens: the tokens, including `<S>`, `</S>` and `<UNK>` (anywhere, but files written by
            `build_vocabulary` put them first). Tokens must be non-empty and may not contain a
            space, tab, CR or LF (the file format could not hold them).
        counts: optional corpus counts, one per token (kept for information; not written).

    Example:
    >>> vocab = Vocabulary(["<S>", "</S>", "<UNK>", "the", "cat"])
    >>> len(vocab), vocab.unk_id
    (5, 2)
    >>> vocab.lookup(tf.ragged.constant([["the", "dog"], ["cat"]])).to_list()
    [[3, 2], [4]]
    """

    BOS = "<S>"
    EOS = "</S>"
    UNK = "<UNK>"
    SPECIALS = (BOS, EOS, UNK)

    def __init__(self, tokens, counts=None):
        self._tokens = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in tokens]
        self._ids = {}
        for i, token in enumerate(self._tokens):
            if not token or any(c in token for c in " \t\r\n"):
                raise ValueError(f"token {i} is {token!r}: tokens must be non-empty and contain no "
                                 "space, tab, CR or LF")
            if token in self._ids:
                raise ValueError(f"duplicate token {token!r} at positions {self._ids[token]} and "
                                 f"{i}")
            self._ids[token] = i
        missing = [t for t in self.SPECIALS if t not in self._ids]
        if missing:
            raise ValueError(f"missing special token(s) {', '.join(missing)}; a vocabulary must "
                             f"contain {', '.join(self.SPECIALS)}")
        if counts is not None and len(counts) != len(self._tokens):
            raise ValueError(f"{len(counts)} counts for {len(self._tokens)} tokens")
        self.counts = None if counts is None else [int(c) for c in counts]
        self._table = None

    @property
    def tokens(self):
        """The tokens in id order (a copy)."""
        return list(self._tokens)

    def __len__(self):
        return len(self._tokens)

    def __contains__(self, token):
        return token in self._ids

    def __repr__(self):
        more = ", ..." if len(self) > 6 else ""
        return f"Vocabulary({len(self)} tokens: {', '.join(self._tokens[:6])}{more})"

    @property
    def bos_id(self):
        """Id of `<S>`."""
        return self._ids[self.BOS]

    @property
    def eos_id(self):
        """Id of `</S>`."""
        return self._ids[self.EOS]

    @property
    def unk_id(self):
        """Id of `<UNK>`, which `lookup` gives to every unknown token."""
        return self._ids[self.UNK]

    def token_id(self, token):
        """The id of one token (Python), `unk_id` if unknown."""
        return self._ids.get(token, self.unk_id)

    def lookup(self, tokens):
        """Token ids (int32) of a `tf.string` tensor or `tf.RaggedTensor` of any shape.

        Unknown tokens get `unk_id`. Works eagerly, in `tf.function` and in `tf.data.Dataset.map`;
        the `tf.lookup.StaticHashTable` is built on first use and kept.

        Args:
            tokens: strings (tensor, ragged tensor, NumPy array or nested lists).

        Example:
        >>> ds = read_corpus("news.en-*").map(vocab.lookup)     # 1-D int32 ids per sentence
        """
        if not isinstance(tokens, tf.RaggedTensor):
            tokens = tf.convert_to_tensor(tokens, tf.string)
        return tf.ragged.map_flat_values(self._lookup_table().lookup, tokens)

    def _lookup_table(self):
        if self._table is None:
            with tf.init_scope():  # built eagerly even when first used while tracing a function
                self._table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(self._tokens, tf.string), tf.range(len(self), dtype=tf.int32)),
                    default_value=self.unk_id)
        return self._table

    @classmethod
    def load(cls, path):
        """Reads a vocabulary file in bilm-tf's format.

        Accepted: UTF-8, `\\n` or `\\r\\n` line ends; each line is `TOKEN`, or `TOKEN COUNT` where
        one or more spaces/tabs separate TOKEN from a decimal COUNT (ignored for the ids, kept in
        `counts` when every line has one). Spaces/tabs around a line are stripped, as bilm-tf's
        `line.strip()` does. The specials may be anywhere. Rejected with a `ValueError` naming the
        file (and line): an empty file, an empty line, any other line shape, invalid UTF-8,
        duplicate tokens, a missing `<S>`, `</S>` or `<UNK>`.

        Args:
            path: the vocabulary file.

        Example:
        >>> vocab = Vocabulary.load("vocab-2016-09-10.txt")
        """
        path = str(path)
        if tf.io.gfile.isdir(path):
            raise ValueError(f"{path} is a directory; a vocabulary is a file with one token per "
                             "line (e.g. the vocab.txt of a training run)")
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                data = f.read()
        except tf.errors.NotFoundError:
            raise FileNotFoundError(f"{path}: no such vocabulary file") from None
        except tf.errors.OpError as error:
            raise OSError(f"{path}: cannot read the vocabulary file ({error.message})") from None
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        if not lines:
            raise ValueError(f"{path}: the vocabulary file is empty")
        tokens, counts, first_line = [], [], {}
        for number, raw in enumerate(lines, 1):
            try:
                line = raw.decode("utf-8").strip(" \t\r")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{number}: not valid UTF-8 ({e.reason})") from None
            fields = _SEPARATOR.split(line) if line else []
            if len(fields) == 2 and _COUNT.fullmatch(fields[1]):
                counts.append(int(fields[1]))
            elif len(fields) != 1:
                what = "an empty line" if not fields else repr(line)
                raise ValueError(f"{path}:{number}: expected 'TOKEN' or 'TOKEN COUNT', got {what}")
            token = fields[0]
            if token in first_line:
                raise ValueError(f"{path}: duplicate token {token!r} on lines {first_line[token]} "
                                 f"and {number}")
            first_line[token] = number
            tokens.append(token)
        missing = [t for t in cls.SPECIALS if t not in first_line]
        if missing:
            raise ValueError(f"{path}: missing special token(s) {', '.join(missing)} (bilm-tf "
                             f"vocabularies must contain {', '.join(cls.SPECIALS)})")
        return cls(tokens, counts if len(counts) == len(tokens) else None)

    def save(self, path):
        """Writes the tokens, one per line, UTF-8, `\\n` after each (no counts; bilm-tf's format).

        The file appears complete or not at all (`elmo_tf.files.write_atomically`).

        Args:
            path: the vocabulary file to write.

        Example:
        >>> vocab.save("vocab.txt")
        """
        data = "".join(token + "\n" for token in self._tokens).encode("utf-8")

        def write(tmp_path):
            with open(tmp_path, "wb") as f:
                f.write(data)

        write_atomically(path, write)
