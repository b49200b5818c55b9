"""build_vocabulary (counts checked against Python), and lookups of the tokens read_corpus gives."""

import collections

import pytest
import tensorflow as tf

from elmo_tf.data.corpus import CorpusStats, read_corpus
from elmo_tf.data.vocabulary_counts import build_vocabulary
from elmo_tf.text.vocabulary import Vocabulary

SPECIALS = ["<S>", "</S>", "<UNK>"]
CORPUS = [
    "the cat sat on the mat .\n",
    "the dog sat .\n\n",
    "a cat , a dog , a bird .\n",
    "wörld 東京 <UNK> <S> zebra\n",
    "b a c\n",
]


@pytest.fixture
def corpus(tmp_path):
    paths = []
    for i, text in enumerate(CORPUS):
        paths.append(tmp_path / f"news.en-{i:05d}")
        paths[-1].write_text(text, encoding="utf-8")
    return paths


def python_counts(paths):
    """The independent expectation: collections.Counter over str.split() of the lines."""
    counter = collections.Counter()
    for path in paths:
        for line in path.read_text("utf-8").split("\n"):
            counter.update(line.split())
    return counter


def test_specials_first_then_descending_frequency_with_ties_by_token(corpus, tmp_path):
    vocab = build_vocabulary(str(tmp_path / "news.en-*"), progress=False)
    counter = python_counts(corpus)
    words = sorted((t for t in counter if t not in SPECIALS), key=lambda t: (-counter[t], t))
    assert vocab.tokens == SPECIALS + words
    assert vocab.tokens[3:8] == ["a", ".", "the", ",", "cat"]  # 4, 3, 3 (. < the), 2, 2 ...
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
    assert vocab.counts[3:] == [counter[t] for t in words]
    sentences = 5
    assert vocab.counts[:3] == [sentences + 1, sentences, 0 + 1]  # literal <S>, <UNK> once each


def test_min_count_and_max_size_count_the_specials(corpus, tmp_path):
    counter = python_counts(corpus)
    words = sorted((t for t in counter if t not in SPECIALS), key=lambda t: (-counter[t], t))
    source = str(tmp_path / "*")
    vocab = build_vocabulary(source, min_count=2, progress=False)
    assert vocab.tokens == SPECIALS + [t for t in words if counter[t] >= 2]
    left_out = sum(counter[t] for t in words if counter[t] < 2)
    assert vocab.counts[2] == left_out + 1
    vocab = build_vocabulary(source, max_size=5, progress=False)
    assert vocab.tokens == SPECIALS + words[:2] and len(vocab) == 5
    for bad in [{"min_count": 0}, {"max_size": 3}, {"min_count": 1.5}]:
        name, value = next(iter(bad.items()))
        with pytest.raises(ValueError, match=f"{name} must be .*{value}"):
            build_vocabulary(source, progress=False, **bad)


def test_a_dataset_gives_the_same_vocabulary_and_progress_does_not_matter(corpus, tmp_path,
                                                                           capsys):
    source = str(tmp_path / "*")
    quiet = build_vocabulary(source, progress=False)
    assert capsys.readouterr().out == ""
    shown = build_vocabulary(read_corpus(source), progress=True, batch_size=2)
    # Whole numbers: the final counts of what the corpus reads.
    sentences = [list(tokens) for tokens in read_corpus(source).as_numpy_iterator()]
    tokens, distinct = sum(map(len, sentences)), len({t for s in sentences for t in s})
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"vocabulary: {len(sentences):,} sentences, {tokens:,} tokens, {distinct:,} distinct")
    assert shown.tokens == quiet.tokens and shown.counts == quiet.counts
    with pytest.raises(TypeError, match="tokenizer"):
        build_vocabulary(read_corpus(source), tokenizer="wordpunct")


def test_a_source_of_files_shows_the_share_of_their_bytes_read(corpus, tmp_path, capsys,
                                                               monkeypatch):
    """On a terminal, the counts so far follow the share of the files' size read (a known
    total); the last line says what was read."""
    import io

    source = str(tmp_path / "*")
    size = sum(f.stat().st_size for f in tmp_path.iterdir())
    terminal = io.StringIO()
    terminal.isatty = lambda: True
    monkeypatch.setattr("sys.stdout", terminal)
    monkeypatch.setattr("time.monotonic", iter(range(0, 10**6, 10)).__next__)  # always due
    build_vocabulary(source, progress=True, batch_size=2)
    shown = [line.strip() for line in terminal.getvalue().replace("\n", "\r").split("\r")
             if line.strip()]
    shares = [int(line.split(" % of ")[0].split()[-1]) for line in shown[:-1]]
    assert shares and shares == sorted(shares) and shares[-1] == 100, shown
    assert all(f" % of {size:,} bytes, " in line for line in shown[:-1]), shown
    assert shown[-1].startswith(f"vocabulary: {size:,} bytes read, "), shown


def test_tokenizer_and_stats_are_passed_to_read_corpus(corpus, tmp_path):
    (tmp_path / "news.en-bad").write_bytes(b"\xff bad\n")
    stats = CorpusStats()
    vocab = build_vocabulary(str(tmp_path / "*"), tokenizer="wordpunct", stats=stats,
                             progress=False)
    assert stats.as_dict()["skipped_non_utf8"] == 1 and "bad" not in vocab
    assert "<" in vocab and "S" in vocab  # wordpunct splits the literal "<S>" too
    only_bad = tmp_path / "only-bad"
    only_bad.write_bytes(b"\xff\n")
    with pytest.raises(ValueError, match="only-bad: 1 of 1 lines are not valid UTF-8"):
        build_vocabulary(str(only_bad), progress=False)
    empty = tmp_path / "blank"
    empty.write_bytes(b"\n  \n")
    with pytest.raises(ValueError, match="no tokens"):
        build_vocabulary(str(empty), progress=False)


def test_lookup_maps_oov_to_unk_inside_tf_data_map_and_on_ragged_input(corpus, tmp_path):
    vocab = Vocabulary(SPECIALS + ["the", "cat", "sat", "."])
    ids = list(read_corpus(str(corpus[0])).map(vocab.lookup).as_numpy_iterator())
    assert [i.tolist() for i in ids] == [[3, 4, 5, 2, 3, 2, 6]]
    assert ids[0].dtype == "int32"
    ragged = vocab.lookup(tf.ragged.constant([["<S>", "cat"], [], ["</S>", "dog", "<UNK>"]]))
    assert ragged.to_list() == [[0, 4], [], [1, 2, 2]] and ragged.dtype == tf.int32
    assert vocab.lookup([["the"], ["zzz"]]).numpy().tolist() == [[3], [2]]
    assert vocab.token_id("dog") == vocab.unk_id and vocab.token_id("cat") == 4
