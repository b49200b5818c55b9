"""Word vocabularies in bilm-tf's file format, and building one from a corpus.

A vocabulary file lists one token per line, UTF-8, and contains `<S>`, `</S>` and `<UNK>`
(`../shared/spec/elmo-reference.md` §6). As in bilm-tf's README, the specials come first and the
words follow by descending corpus frequency: the training softmax samples negatives with TF's
log-uniform (Zipfian) candidate sampler, which assumes that a smaller id means a more frequent word.

Example:
>>> vocab = build_vocabulary("news.en-*", min_count=3)   # same tokens as read_corpus(...)
>>> vocab.save("vocab.txt")
>>> Vocabulary.load("vocab.txt").lookup(tf.constant(["the", "qwzx"]))
<tf.Tensor: shape=(2,), dtype=int32, numpy=array([3, 2], dtype=int32)>
"""

import collections
import logging
import re

import tensorflow as tf

from elmo_tf.data.corpus import CorpusStats, read_corpus_batches
from elmo_tf.files import write_atomically

logger = logging.getLogger("elmo_tf")

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


def build_vocabulary(dataset_or_source, *, min_count=1, max_size=None, progress=True,
                     batch_size=4096, **read_corpus_kwargs):
    """Counts the tokens of a corpus and returns the vocabulary, specials first, then by frequency.

    Order: `<S>`, `</S>`, `<UNK>`, then the words by descending count, ties by the token string
    (code point order). Corpus tokens equal to a special are not listed twice. `counts` holds the
    word counts; `<S>` and `</S>` count the sentences (plus literal occurrences), `<UNK>` the
    tokens left out by `min_count`/`max_size` (plus literal occurrences).

    Counting streams over the corpus in batches: `tf.unique_with_counts` runs in a parallel
    `tf.data` map, Python only adds up the per-batch unique tokens. With a source, the batches come
    from `read_corpus_batches`, the same tokenization code that `read_corpus` unbatches; this is
    several times faster than passing a dataset (which pays tf.data's per-sentence overhead).

    Args:
        dataset_or_source: a `read_corpus` dataset (1-D `tf.string` elements), or a source for
            `read_corpus` (a glob, a list of globs, `"tfds:NAME"`).
        min_count: words seen fewer times are left out (`<UNK>` in training).
        max_size: at most this many tokens in all, the 3 specials included (most frequent kept).
        progress: show a `keras.utils.Progbar` (sentences so far, tokens, distinct tokens).
        batch_size: sentences (with a source: lines) counted per batch.
        **read_corpus_kwargs: passed to `read_corpus` with a source (`tokenizer=...`, `stats=...`
            etc.); with a source and no `stats`, a `CorpusStats` is made and logged at the end.

    Returns:
        `Vocabulary` with `counts`.

    Raises:
        ValueError: `min_count` < 1, `max_size` < 4, the corpus has no tokens, more than half of
            a source's lines are not valid UTF-8 (each such line is dropped, with a warning),
            or a token is not valid UTF-8 (only possible with a dataset that does not come from
            `read_corpus`).

    Example:
    >>> vocab = build_vocabulary("news.en-*", min_count=3, tokenizer="whitespace")
    >>> vocab.tokens[:6]
    ['<S>', '</S>', '<UNK>', 'the', ',', '.']
    """
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be an int >= 1, got {min_count!r}")
    if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int)
                                 or max_size < 4):
        raise ValueError(f"max_size must be None or an int >= 4 (3 specials + 1 word), got "
                         f"{max_size!r}")
    stats = None
    if isinstance(dataset_or_source, tf.data.Dataset):
        if read_corpus_kwargs:
            raise TypeError(f"read_corpus arguments ({', '.join(read_corpus_kwargs)}) need a "
                            "source, not a dataset")
        batches = dataset_or_source.ragged_batch(batch_size)
    else:
        stats = read_corpus_kwargs.setdefault("stats", CorpusStats())
        batches = read_corpus_batches(dataset_or_source, lines_per_batch=batch_size,
                                      **read_corpus_kwargs)

    counter, sentences, total = _count(batches, progress)
    if stats is not None:
        stats.log()
        counts = stats.as_dict()
        if counts["skipped_non_utf8"] * 2 > counts["lines_read"]:
            raise ValueError(
                f"{dataset_or_source}: {counts['skipped_non_utf8']:,} of "
                f"{counts['lines_read']:,} lines are not valid UTF-8 (a binary or "
                "differently encoded file?); a corpus is UTF-8 text, one sentence per line.")
    if not total:
        raise ValueError(f"the corpus has no tokens ({sentences} sentences)")
    try:
        counter = {token.decode("utf-8"): count for token, count in counter.items()}
    except UnicodeDecodeError as e:
        raise ValueError(f"a token is not valid UTF-8: {e.object!r}") from None

    special = {t: counter.pop(t, 0) for t in Vocabulary.SPECIALS}
    words = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    kept = [(t, c) for t, c in words if c >= min_count]
    if max_size is not None:
        kept = kept[:max_size - 3]
    left_out = sum(counter.values()) - sum(c for _, c in kept)
    counts = [sentences + special[Vocabulary.BOS], sentences + special[Vocabulary.EOS],
              left_out + special[Vocabulary.UNK]] + [c for _, c in kept]
    logger.info("vocabulary: %d words kept of %d distinct (%d sentences, %d tokens, %.2f%% of the "
                "tokens out of vocabulary)", len(kept), len(words), sentences, total,
                100.0 * left_out / total)
    return Vocabulary(list(Vocabulary.SPECIALS) + [t for t, _ in kept], counts)


def _count(batches, progress):
    """Returns (Counter of token bytes, sentences, tokens) of a dataset of sentence batches."""

    def count_batch(batch):
        ragged = isinstance(batch, tf.RaggedTensor)
        values = batch.flat_values if ragged else tf.reshape(batch, [-1])
        unique, _, counts = tf.unique_with_counts(values, out_idx=tf.int64)
        sentences = batch.nrows() if ragged else tf.shape(batch)[0]
        return tf.cast(sentences, tf.int64), tf.size(values, out_type=tf.int64), unique, counts

    batches = (batches
               .map(count_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
               .prefetch(tf.data.AUTOTUNE))
    bar = None
    if progress:
        import keras

        bar = keras.utils.Progbar(None, unit_name="sentence", stateful_metrics=["tokens", "types"])
    counter, sentences, total = collections.Counter(), 0, 0
    for n, size, unique, counts in batches.as_numpy_iterator():
        sentences, total = sentences + int(n), total + int(size)
        for token, count in zip(unique.tolist(), counts.tolist()):
            counter[token] += count
        if bar is not None:
            bar.update(sentences, [("tokens", total), ("types", len(counter))])
    if bar is not None:
        bar.update(sentences, [("tokens", total), ("types", len(counter))], finalize=True)
    return counter, sentences, total
