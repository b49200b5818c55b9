"""`build_vocabulary`: a `Vocabulary` (`elmo_tf.text.vocabulary`) counted from a corpus, with the
same tokens `read_corpus` gives training."""

import collections
import logging
import sys
import time

import tensorflow as tf

from elmo_tf.data.corpus import CorpusStats, corpus_bytes, read_corpus_batches
from elmo_tf.files import readable_size
from elmo_tf.text.vocabulary import Vocabulary

logger = logging.getLogger("elmo_tf")


def build_vocabulary(dataset_or_source, *, min_count=1, max_size=None, progress=True,
                     batch_size=4096, stats=None, **read_corpus_kwargs):
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
        progress: show the counts so far (sentences, tokens, distinct tokens) on stdout, and
            with a source of files, the share of their bytes read.
        batch_size: sentences (with a source: lines) counted per batch.
        stats: with a source, a `CorpusStats` the corpus's line counts are added to (one is made
            if None); they are logged at the end.
        **read_corpus_kwargs: passed to `read_corpus` with a source (`tokenizer=...` etc.).

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
    total_bytes = None
    if isinstance(dataset_or_source, tf.data.Dataset):
        if read_corpus_kwargs or stats is not None:
            names = [*read_corpus_kwargs, *(["stats"] if stats is not None else [])]
            raise TypeError(f"read_corpus arguments ({', '.join(names)}) need a source, not a "
                            "dataset")
        batches = dataset_or_source.ragged_batch(batch_size)
    else:
        stats = CorpusStats() if stats is None else stats
        batches = read_corpus_batches(dataset_or_source, lines_per_batch=batch_size,
                                      with_counts=True, **read_corpus_kwargs)
        total_bytes = corpus_bytes(dataset_or_source) if progress else None

    counter, sentences, total = _count(batches, progress, stats, total_bytes)
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
    logger.info("vocabulary: %s words kept of %s distinct (%s sentences, %s tokens, %.2f%% of the "
                "tokens out of vocabulary)", f"{len(kept):,}", f"{len(words):,}", f"{sentences:,}",
                f"{total:,}", 100.0 * left_out / total)
    return Vocabulary(list(Vocabulary.SPECIALS) + [t for t, _ in kept], counts)


def _count(batches, progress, stats=None, total_bytes=None):
    """Returns (Counter of token bytes, sentences, tokens) of a dataset of sentence batches
    (with their line counts, added to `stats`, when it is given; `total_bytes`: the files'
    size, the progress's total)."""

    def count_batch(batch, *line_counts):
        ragged = isinstance(batch, tf.RaggedTensor)
        values = batch.flat_values if ragged else tf.reshape(batch, [-1])
        unique, _, counts = tf.unique_with_counts(values, out_idx=tf.int64)
        sentences = batch.nrows() if ragged else tf.shape(batch)[0]
        return (tf.cast(sentences, tf.int64), tf.size(values, out_type=tf.int64), unique, counts,
                *line_counts)

    batches = (batches
               .map(count_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
               .prefetch(tf.data.AUTOTUNE))
    bar = _Counts(total_bytes, stats.bytes_read if stats is not None else 0) if progress else None
    counter, sentences, total = collections.Counter(), 0, 0
    for n, size, unique, counts, *line_counts in batches.as_numpy_iterator():
        if stats is not None:
            stats.add(*line_counts)
        sentences, total = sentences + int(n), total + int(size)
        for token, count in zip(unique.tolist(), counts.tolist()):
            counter[token] += count
        if bar is not None:
            bar.update(sentences, total, len(counter), stats)
    if bar is not None:
        bar.update(sentences, total, len(counter), stats, final=True)
    return counter, sentences, total


class _Counts:
    """The counts so far, as whole numbers on one line of standard output (where `elmo-tf`'s
    progress goes to stderr), after the share of the files read where their size is known
    (`total_bytes`): refreshed in place at most twice a second on a terminal, and written once
    more, whole, at the end (with the size read)."""

    def __init__(self, total_bytes=None, bytes_before=0):
        self.shown, self.width = 0.0, 0
        self.total_bytes, self.bytes_before = total_bytes, bytes_before  # a given stats' own

    def update(self, sentences, tokens, types, stats=None, final=False):
        now = time.monotonic()
        interactive = sys.stdout.isatty()
        if not final and (not interactive or now - self.shown < 0.5):
            return
        self.shown = now
        line = f"{sentences:,} sentences, {tokens:,} tokens, {types:,} distinct"
        read = stats.bytes_read - self.bytes_before if stats is not None else None
        if self.total_bytes and read is not None:
            line = (f"{readable_size(read)} read, " if final else
                    f"{min(100, 100 * read // self.total_bytes)} % of "
                    f"{readable_size(self.total_bytes)}, ") + line
        line = "vocabulary: " + line
        line, self.width = line.ljust(self.width), len(line)  # no tail of a longer line left
        sys.stdout.write(("\r" if interactive else "") + line + ("\n" if final else ""))
        sys.stdout.flush()

