"""Training corpora as `tf.data`: one 1-D `tf.string` tensor of tokens per sentence.

Two kinds of source are read:

* text files (a glob or a list of globs), one sentence per line, as in the 1B Word Benchmark
  (`training-monolingual.tokenized.shuffled/news.en-*`, 99 shards of pre-tokenized text);
* `"tfds:NAME"` (e.g. `"tfds:lm1b"`, `"tfds:glue/sst2"`), a TensorFlow Datasets dataset that is
  already prepared in a local data dir. Nothing is ever downloaded (`docs/conventions.md` §8
  says how to prepare `lm1b`/`glue` offline from their archives with `manual_dir`, and how to
  turn local text files into a TFDS dataset with `TfDataBuilder`).

Tokenization happens here, in the `tf.data` pipeline, never in a model. Lines are processed in
batches with vectorized string ops (`read_corpus_batches`; `read_corpus` unbatches them): a line
that is not valid UTF-8 is dropped, a line with more than `max_tokens_per_line` tokens is cut into
pieces of at most that many tokens, and lines without tokens are dropped. Both events are counted
with the batches that met them (`CorpusStats`).

`build_vocabulary` (`elmo_tf.data.vocabulary_counts`) iterates the very same datasets, so vocabulary and
training always see identical tokens.
"""

import logging
import os
import re

import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.text.tokenizers import INSTALL_HINT, get_tokenizer

logger = logging.getLogger("elmo_tf")

# The generated corpus of `elmo_tf.data.generated_corpus`, by name (training writes it into its
# run directory).
BUILTIN_CORPUS = "builtin"

_LINES_PER_BATCH = 256


class CorpusStats:
    """Counts of what reading a corpus met: lines read, lines skipped (not UTF-8), long lines
    split. Plain Python counts: `read_corpus_batches(..., with_counts=True)` gives each batch's
    counts with its tokens, and whoever iterates adds them (`add`; `build_vocabulary` does);
    `CorpusStats.count(source)` reads a corpus once for them.

    Attributes:
        lines_read: lines (or TFDS examples) read.
        skipped_non_utf8: lines dropped because they are not valid UTF-8.
        split_long_lines: lines cut into pieces because they had more than `max_tokens_per_line`
            tokens (counted once per line, not per piece).
        bytes_read: the lines' bytes, one line end each (of files: their size, where every
            line ends in one byte, `corpus_bytes`).

    Example:
    >>> stats = CorpusStats.count("news.en-*")
    >>> stats.log()          # elmo_tf: 306,068 lines read, 0 skipped (not valid UTF-8), ...
    """

    NAMES = ("lines_read", "skipped_non_utf8", "split_long_lines", "bytes_read")

    def __init__(self):
        self.reset()

    @classmethod
    def count(cls, source, **read_corpus_kwargs):
        """The counts of one pass over `source` (read as `read_corpus` reads it)."""
        stats = cls()
        for _, counts in read_corpus_batches(source, with_counts=True, **read_corpus_kwargs):
            stats.add(counts)
        return stats

    def add(self, counts):
        """Adds one batch's counts (`[lines_read, skipped_non_utf8, split_long_lines,
        bytes_read]`)."""
        for name, value in zip(self.NAMES, counts):
            setattr(self, name, getattr(self, name) + int(value))

    def reset(self):
        """Sets all counters to 0."""
        for name in self.NAMES:
            setattr(self, name, 0)

    def as_dict(self):
        """The counters, e.g. `{"lines_read": 10, "skipped_non_utf8": 1, ...}`."""
        return {name: getattr(self, name) for name in self.NAMES}

    def summary(self):
        """One line for humans, e.g. `10 lines read, 1 skipped (not valid UTF-8), 0 split (...)`."""
        c = self.as_dict()
        return (f"{c['lines_read']:,} lines read, {c['skipped_non_utf8']:,} skipped (not valid "
                f"UTF-8), {c['split_long_lines']:,} split (more than max_tokens_per_line tokens)")

    def log(self, level=logging.INFO):
        """Logs `summary()` to the `elmo_tf` logger (as a warning when lines were skipped)."""
        if self.skipped_non_utf8:
            level = max(level, logging.WARNING)
        logger.log(level, "corpus: %s", self.summary())

    def __repr__(self):
        return f"CorpusStats({self.as_dict()})"


def read_corpus(source, *, tokenizer="whitespace", max_tokens_per_line=400, tfds_data_dir=None,
                tfds_split="train", text_feature="text", shuffle_files=False, seed=None):
    """Reads a corpus as a `tf.data.Dataset` of 1-D `tf.string` tensors, one per sentence.

    Elements hold the sentence's tokens without `<S>`/`</S>`; empty lines are dropped. The order
    is the file order (globs sorted, then in the given order) unless `shuffle_files`.

    Args:
        source: a file glob, or a list of globs, of UTF-8 text files with one sentence per line;
            or `"tfds:NAME"` (`"tfds:lm1b"`, `"tfds:glue/sst2"`, `"tfds:NAME/CONFIG:VERSION"`)
            for a TFDS dataset already prepared in `tfds_data_dir`.
        tokenizer: `"whitespace"` (default), `"wordpunct"`, `"unicode_script"` or a callable; see
            `get_tokenizer`.
        max_tokens_per_line: longer lines are cut into pieces of at most this many tokens.
        tfds_data_dir: TFDS data dir (default: TFDS's own, `~/tensorflow_datasets` or
            `$TFDS_DATA_DIR`).
        tfds_split: TFDS split, slicing allowed (`"train[:10%]"`).
        text_feature: the text feature of the TFDS examples (`"text"` for lm1b, `"sentence"` for
            glue/sst2).
        shuffle_files: shuffle the order of the files (TFDS: its shards) in every epoch.
        seed: seed for `shuffle_files`.

    Returns:
        `tf.data.Dataset` with element spec `TensorSpec([None], tf.string)`.

    Raises:
        FileNotFoundError: a glob matches no file, or the TFDS dataset is not prepared.
        ValueError: all files are empty, bad `tokenizer` / `max_tokens_per_line`, unknown
            `text_feature`.
        ImportError: tensorflow-text / tensorflow-datasets missing where needed.

    Example:
    >>> ds = read_corpus("1-billion-word/training-monolingual.tokenized.shuffled/news.en-*")
    >>> next(iter(ds))
    <tf.Tensor: shape=(5,), dtype=string, numpy=array([b'The', b'cat', b'sat', b'.', b'"'], ...)>
    >>> ds = read_corpus("tfds:lm1b", tfds_data_dir="/data/tfds", tfds_split="test")
    """
    batches = read_corpus_batches(
        source, lines_per_batch=_LINES_PER_BATCH, tokenizer=tokenizer,
        max_tokens_per_line=max_tokens_per_line, tfds_data_dir=tfds_data_dir,
        tfds_split=tfds_split, text_feature=text_feature, shuffle_files=shuffle_files, seed=seed)
    # Unbatching dense rows and cutting each to its length is faster than unbatching
    # the ragged batch, and gives a `TensorSpec` (which `padded_batch` needs).
    return (batches.map(lambda sentences: (sentences.to_tensor(), sentences.row_lengths()))
            .unbatch()
            .map(lambda tokens, length: tokens[:length]))


def read_corpus_batches(source, *, lines_per_batch=1024, tokenizer="whitespace",
                        max_tokens_per_line=400, tfds_data_dir=None, tfds_split="train",
                        text_feature="text", shuffle_files=False, seed=None, with_counts=False):
    """`read_corpus`, batch-wise: one `tf.RaggedTensor` `[sentences, None]` per batch of lines.

    This is the one place where corpora are tokenized; `read_corpus` unbatches it and
    `build_vocabulary` counts it. Per-batch processing avoids tf.data's per-element overhead,
    so bulk consumers (counting, conversion to ids) should prefer it.

    Args:
        source: see `read_corpus`.
        lines_per_batch: lines (TFDS: examples) read per batch. A batch holds fewer sentences
            when lines are skipped or empty, more when long lines are split.
        tokenizer, max_tokens_per_line, tfds_data_dir, tfds_split, text_feature, shuffle_files,
            seed: see `read_corpus`.
        with_counts: give each batch's counts with it: `(tokens, counts)`, `counts` int64
            `[lines read, lines skipped (not UTF-8), long lines split, bytes read]`
            (`CorpusStats.add`).

    Returns:
        `tf.data.Dataset` of string `tf.RaggedTensor`s `[sentences, None]` (ragged rank 1), or of
        `(tokens, counts)` with `with_counts`.

    Example:
    >>> for batch in read_corpus_batches("news.en-*", lines_per_batch=4096):
    ...     ids = vocabulary.lookup(batch)
    """
    tokenize = get_tokenizer(tokenizer)
    check_positive_ints(max_tokens_per_line=max_tokens_per_line,
                        lines_per_batch=lines_per_batch)
    if isinstance(source, str) and source.startswith("tfds:"):
        lines = _tfds_lines(source[len("tfds:"):], tfds_data_dir, tfds_split, text_feature,
                            shuffle_files, seed)
    else:
        files = _find_files(source)
        names = tf.data.Dataset.from_tensor_slices(files)
        if shuffle_files:
            names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        lines = tf.data.TextLineDataset(names)
    max_tokens = max_tokens_per_line

    def process(batch):
        valid = tf.equal(tf.strings.unicode_transcode(batch, "UTF-8", "UTF-8", errors="replace"),
                         batch)  # exact: only invalid bytes are replaced (U+FFFD itself is kept)
        tokens = tokenize(tf.boolean_mask(batch, valid)).with_row_splits_dtype(tf.int64)
        lengths = tokens.row_lengths()
        values = tokens.flat_values
        # A piece starts at every max_tokens-th token of a line; empty lines get no piece.
        position = tf.range(tf.size(values, out_type=tf.int64)) - tf.repeat(tokens.row_starts(),
                                                                             lengths)
        starts = tf.where(tf.equal(position % max_tokens, 0))[:, 0]
        pieces = tf.RaggedTensor.from_row_starts(values, starts)
        if not with_counts:
            return pieces
        return pieces, tf.stack([tf.size(batch, out_type=tf.int64),
                                 tf.math.count_nonzero(~valid),
                                 tf.math.count_nonzero(lengths > max_tokens),
                                 tf.reduce_sum(tf.cast(tf.strings.length(batch), tf.int64))
                                 + tf.size(batch, out_type=tf.int64)])

    return (lines.batch(lines_per_batch)
            .map(process, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def corpus_bytes(source):
    """The size in bytes of a corpus's files (a glob or a list of globs), or None for a TFDS
    source: what `CorpusStats.bytes_read` reaches after one pass where every line ends in one
    byte (`\n`).

    Example:
    >>> corpus_bytes("news.en-*")
    1048576
    """
    if isinstance(source, str) and source.startswith("tfds:"):
        return None
    return sum(tf.io.gfile.stat(f).length for f in _find_files(source))


def _find_files(source, log=False):
    single = isinstance(source, (str, bytes, os.PathLike))
    patterns = [os.fsdecode(p) for p in ([source] if single else source)]
    if not patterns:
        raise FileNotFoundError("no corpus files given (an empty list of globs)")
    files = {}  # an ordered set
    for pattern in patterns:
        matches = [f for f in sorted(_remote(tf.io.gfile.glob, pattern)) if not _remote(
            tf.io.gfile.isdir, f)]
        if not matches:
            raise FileNotFoundError(f"no corpus file matches {pattern!r}")
        files.update(dict.fromkeys(matches))
    files = list(files)
    for f in files:
        _check_readable(f, patterns)
    if not any(_remote(_has_text, f) for f in files):
        raise ValueError(f"the corpus is empty: the {len(files)} file(s) matching "
                         f"{', '.join(map(repr, patterns))} contain only whitespace, no tokens")
    if log:
        logger.info("corpus: %d file(s) matching %s", len(files), ", ".join(patterns))
    return files


def _remote(function, path):
    """`function(path)`, TensorFlow's file-system error (a URL's: a scheme this TensorFlow
    cannot read, a host it cannot reach) an OSError that names `path` in one line."""
    try:
        return function(path)
    except tf.errors.OpError as error:
        reason = error.message.strip().splitlines()[0] if error.message.strip() else \
            type(error).__name__
        raise OSError(f"corpus {path!r} cannot be read: {reason}") from None


def _check_readable(path, patterns):
    """Raises FileNotFoundError / PermissionError naming a matched file that cannot be read (a
    dangling symbolic link, no read permission), before any pass over the corpus."""
    matched = f"matched by {', '.join(map(repr, patterns))}"
    if "://" in path:
        return  # a remote file system's errors come from tf.io.gfile, with the path
    if not os.path.exists(path):
        target = os.readlink(path) if os.path.islink(path) else None
        raise FileNotFoundError(f"corpus file {path} ({matched}) "
                                + (f"is a broken symbolic link (to {target}, which does not exist)"
                                   if target is not None else "does not exist") + ".")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as error:
        raise type(error)(f"corpus file {path} ({matched}) cannot be read: "
                          f"{error.strerror or error}.") from None


def corpus_identity(source, tfds_data_dir=None, log=False):
    """What makes two runs' corpora the same corpus, as run.json records it: for text files,
    each file's resolved path and size (`[{"file": ..., "bytes": ...}]`, so that the same files
    match from any working directory, by a relative or an absolute glob); `"tfds:NAME"` and
    `"builtin"` as given. Checks the files as `read_corpus` does (every glob matches, every
    file is readable, not all are empty), so it is the check before any work; `log`: say how
    many files the globs matched (`train` does, once; the passes over the corpus do not)."""
    if isinstance(source, str) and (source == BUILTIN_CORPUS or source.startswith("tfds:")):
        return source
    return [{"file": os.path.realpath(f) if "://" not in f else f,
             "bytes": tf.io.gfile.stat(f).length} for f in _find_files(source, log)]


def _has_text(path, chunk_size=1 << 16):
    """Whether the file has a non-whitespace byte; reads only up to the first one."""
    if tf.io.gfile.stat(path).length == 0:
        return False
    with tf.io.gfile.GFile(path, "rb") as f:
        while chunk := f.read(chunk_size):
            if chunk.strip():
                return True
    return False


def _tfds_lines(name, data_dir, split, text_feature, shuffle_files, seed):
    if not re.fullmatch(r"\w+(/[\w.-]+)?(:[\d.*]+)?", name, re.ASCII):
        raise ValueError(f"tfds:{name}: expected 'tfds:NAME', 'tfds:NAME/CONFIG' or "
                         "'tfds:NAME/CONFIG:VERSION' (namespaced/community datasets are not read, "
                         "they would be fetched over the network)")
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise ImportError(f"reading 'tfds:{name}' needs tensorflow-datasets: {INSTALL_HINT}"
                          ) from e
    where = data_dir or "TFDS's default data dir"
    how = (f"Prepare it there first, offline: tfds.builder({name!r}, data_dir=...)"
           ".download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=M)) with "
           "the original archives in M (for lm1b: 1-billion-word-language-modeling-benchmark-"
           "r13output.tar.gz), or local text files via tfds.dataset_builders.TfDataBuilder, or "
           "copy a prepared NAME/CONFIG/VERSION directory there. Nothing is downloaded here.")
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.DatasetNotFoundError as e:
        raise FileNotFoundError(f"TFDS dataset {name!r} is not prepared in {where} (and no builder "
                                f"of that name is registered). {how}") from e
    if not builder.is_prepared():
        raise FileNotFoundError(f"TFDS dataset {name!r} is not prepared in {where} (looked for "
                                f"{builder.data_dir}). {how}")
    features = builder.info.features
    if text_feature not in features or features[text_feature].dtype != tf.string:
        raise ValueError(f"TFDS dataset {name!r} has no text feature {text_feature!r}; its "
                         f"features: {', '.join(features)} (pass text_feature=...)")
    examples = builder.as_dataset(split=split, shuffle_files=shuffle_files,
                                  read_config=tfds.ReadConfig(shuffle_seed=seed))
    return examples.map(lambda example: example[text_feature])
