"""read_corpus: globs, bad input, tokenizers, counters (also in MirroredStrategy), offline TFDS."""

import socket
import sys

import pytest
import tensorflow as tf

from elmo_tf.data.corpus import CorpusStats, corpus_bytes, read_corpus, read_corpus_batches

SHARDS = [
    "The cat sat on the mat .\n\nA dog , a cat .\n",
    "  \n\"Quoted\" words ( and brackets ) here\n",
    "wörld 東京 🙂\tand\u00a0nbsp\n",  # tab and U+00A0 separate tokens, like str.split()
]


def write_shards(directory, contents=SHARDS, name="news.en-{:05d}-of-00100"):
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, text in enumerate(contents):
        paths.append(directory / name.format(i))
        paths[-1].write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return paths


def sentences(dataset):
    return [[t.decode("utf-8") for t in s.numpy().tolist()] for s in dataset]


def expected(paths):
    """The independent expectation: Python's str.split() per line, empty lines dropped."""
    lines = [line for p in paths for line in p.read_text("utf-8").split("\n")]
    return [line.split() for line in lines if line.split()]


def test_a_glob_over_several_shards_reads_them_in_order(tmp_path):
    paths = write_shards(tmp_path / "corpus")
    ds = read_corpus(str(tmp_path / "corpus" / "news.en-*"))
    assert ds.element_spec == tf.TensorSpec([None], tf.string)
    assert sentences(ds) == expected(paths)
    assert sentences(ds)[-1] == ["wörld", "東京", "🙂", "and", "nbsp"]


def test_a_list_of_globs_is_read_in_the_given_order_without_duplicates(tmp_path):
    paths = write_shards(tmp_path)
    ds = read_corpus([str(paths[2]), str(tmp_path / "news.en-*")])
    assert sentences(ds) == expected([paths[2], paths[0], paths[1]])


def test_shuffled_files_give_the_same_sentences(tmp_path):
    paths = write_shards(tmp_path)
    got = sentences(read_corpus(str(tmp_path / "*"), shuffle_files=True, seed=3))
    assert sorted(got) == sorted(expected(paths))


def test_a_glob_matching_no_file_names_the_pattern(tmp_path):
    write_shards(tmp_path)
    missing = str(tmp_path / "heldout-*")
    with pytest.raises(FileNotFoundError, match="heldout-"):
        read_corpus(missing)
    with pytest.raises(FileNotFoundError, match="heldout-"):
        read_corpus([str(tmp_path / "news.en-*"), missing])


def test_files_without_any_token_are_rejected_before_reading(tmp_path):
    write_shards(tmp_path, ["", "\n \n\t\n"])
    with pytest.raises(ValueError, match="corpus is empty"):
        read_corpus(str(tmp_path / "*"))


def test_non_utf8_lines_are_skipped_and_counted_valid_multibyte_lines_kept(tmp_path):
    shards = [b"\xff\xfe bad\nw\xc3\xb6rld \xe6\x9d\xb1\xe4\xba\xac\n",
              b"cut \xe6\x9d\n\xed\xa0\x80 surrogate\n", b"U+FFFD \xef\xbf\xbd is valid\nlast \xc3\xb6\n"]
    write_shards(tmp_path, shards)
    got = sentences(read_corpus(str(tmp_path / "*")))
    assert got == [["wörld", "東京"], ["U+FFFD", "\ufffd", "is", "valid"], ["last", "ö"]]
    stats = CorpusStats.count(str(tmp_path / "*"))
    assert stats.as_dict() == {"lines_read": 6, "skipped_non_utf8": 3, "split_long_lines": 0,
                               "bytes_read": sum(map(len, shards))}
    assert "3 skipped (not valid UTF-8)" in stats.summary()


def test_a_10000_token_line_is_split_into_pieces_and_counted(tmp_path):
    words = [f"w{i}" for i in range(10_000)]
    write_shards(tmp_path, ["short line\n" + " ".join(words) + "\n" + " ".join(words[:401]) + "\n"])
    got = sentences(read_corpus(str(tmp_path / "*"), max_tokens_per_line=400))
    assert got[0] == ["short", "line"]
    assert [len(s) for s in got[1:]] == [400] * 25 + [400, 1]
    assert [t for s in got[1:26] for t in s] == words
    assert [t for s in got[26:] for t in s] == words[:401]
    stats = CorpusStats.count(str(tmp_path / "*"), max_tokens_per_line=400)
    assert stats.as_dict()["split_long_lines"] == 2
    with pytest.raises(ValueError, match="max_tokens_per_line"):
        read_corpus(str(tmp_path / "*"), max_tokens_per_line=0)


def test_stats_log_to_the_elmo_tf_logger(tmp_path, caplog):
    write_shards(tmp_path, [b"ok\n\xff\n"])
    stats = CorpusStats.count(str(tmp_path / "*"))
    with caplog.at_level("INFO", logger="elmo_tf"):
        stats.log()
    assert caplog.records[-1].name == "elmo_tf" and caplog.records[-1].levelname == "WARNING"
    assert "2 lines read, 1 skipped" in caplog.text
    stats.reset()
    assert stats.as_dict() == {"lines_read": 0, "skipped_non_utf8": 0, "split_long_lines": 0,
                               "bytes_read": 0}


def test_wordpunct_splits_punctuation_with_core_ops(tmp_path):
    write_shards(tmp_path, ["Hello, wörld! can't\u00a0stop (3.5%).\n"])
    got = sentences(read_corpus(str(tmp_path / "*"), tokenizer="wordpunct"))
    assert got == [["Hello", ",", "wörld", "!", "can", "'", "t", "stop", "(", "3", ".", "5", "%)."]]


def test_unicode_script_tokenizer_splits_punctuation(tmp_path):
    pytest.importorskip("tensorflow_text")
    write_shards(tmp_path, ["Hello, wörld! 東京.\n"])
    got = sentences(read_corpus(str(tmp_path / "*"), tokenizer="unicode_script"))
    assert got == [["Hello", ",", "wörld", "!", "東京", "."]]


def test_an_unknown_tokenizer_lists_the_accepted_names(tmp_path):
    write_shards(tmp_path)
    with pytest.raises(ValueError, match="'whitespace', 'wordpunct', 'unicode_script'"):
        read_corpus(str(tmp_path / "*"), tokenizer="spacy")


def test_each_batch_carries_its_own_counts(tmp_path):
    """The counts travel with the batches that met them (no state is updated from inside the
    pipeline): their sum over one pass is the corpus's, whatever the batching."""
    write_shards(tmp_path, [b"a b c\n\xff\n" * 10 + b"x " * 9 + b"\n"])
    batches = list(read_corpus_batches(str(tmp_path / "*"), lines_per_batch=4,
                                       max_tokens_per_line=2, with_counts=True))
    assert len(batches) == 6
    # Each batch: "a b c", "\xff", "a b c", "\xff" (their bytes and line ends: 16).
    assert [c.numpy().tolist() for _, c in batches[:2]] == [[4, 2, 2, 16], [4, 2, 2, 16]]
    stats = CorpusStats()
    for _, counts in batches:
        stats.add(counts)
    assert stats.as_dict() == {"lines_read": 21, "skipped_non_utf8": 10, "split_long_lines": 11,
                               "bytes_read": 99}
    assert corpus_bytes(str(tmp_path / "*")) == 99  # every line ends in one byte
    assert sum(int(tokens.row_lengths().shape[0]) for tokens, _ in batches) == \
        len(sentences(read_corpus(str(tmp_path / "*"), max_tokens_per_line=2)))


# --- TFDS, offline ---------------------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch):
    """Any Python-level connection attempt fails the test loudly."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def tfds():
    tfds = pytest.importorskip("tensorflow_datasets")
    pytest.importorskip("importlib_resources")  # TfDataBuilder needs it (ecosystem.md Q5)
    tfds.disable_progress_bar()
    return tfds


def test_a_local_tfds_dataset_is_read_offline(tmp_path, tfds, no_network):
    lines = ["The first sentence .", "", "wörld 東京", "third one"]
    examples = tf.data.Dataset.from_tensor_slices(lines).map(lambda line: {"text": line})
    builder = tfds.dataset_builders.TfDataBuilder(
        name="tiny_lm", config="default", version="1.0.0", data_dir=str(tmp_path),
        split_datasets={"train": examples, "test": examples.take(1)},
        features=tfds.features.FeaturesDict({"text": tfds.features.Text()}))
    builder.download_and_prepare()

    got = sentences(read_corpus("tfds:tiny_lm", tfds_data_dir=str(tmp_path)))
    assert sorted(got) == sorted(line.split() for line in lines if line)  # TFDS shuffles
    got = sentences(read_corpus("tfds:tiny_lm/default:1.0.0", tfds_data_dir=str(tmp_path),
                                tfds_split="test"))
    assert got == [["The", "first", "sentence", "."]]
    with pytest.raises(ValueError, match="no text feature 'sentence'.*text"):
        read_corpus("tfds:tiny_lm", tfds_data_dir=str(tmp_path), text_feature="sentence")


@pytest.mark.parametrize("name", ["lm1b", "glue/sst2", "no_such_dataset"])
def test_an_unprepared_tfds_dataset_is_a_clear_error_and_nothing_is_downloaded(
        tmp_path, tfds, no_network, name):
    with pytest.raises(FileNotFoundError, match=r"not prepared in .*download_and_prepare.*manual"):
        read_corpus(f"tfds:{name}", tfds_data_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []  # nothing written either


def test_namespaced_tfds_names_are_refused():
    with pytest.raises(ValueError, match="namespaced"):
        read_corpus("tfds:huggingface:imdb")


def test_read_corpus_batches_holds_the_same_sentences_batch_wise(tmp_path):
    paths = write_shards(tmp_path)
    batches = list(read_corpus_batches(str(tmp_path / "*"), lines_per_batch=2))
    assert all(isinstance(b, tf.RaggedTensor) for b in batches)
    got = [[t.decode("utf-8") for t in s] for b in batches for s in b.to_list()]
    assert got == expected(paths)
    with pytest.raises(ValueError, match="lines_per_batch must be a positive integer; got 0"):
        read_corpus_batches(str(tmp_path / "*"), lines_per_batch=0)


@pytest.mark.parametrize("module, kwargs, hint", [
    # A dependency (keras-hub requires it), missing only from a broken install.
    ("tensorflow_text", {"source": "*", "tokenizer": "unicode_script"},
     r"pip install tensorflow-text==2\.21\.1"),
    ("tensorflow_datasets", {"source": "tfds:lm1b"}, r"pip install 'elmo-tf\[data\]'"),
])
def test_missing_packages_say_how_to_install_them(tmp_path, monkeypatch, module, kwargs, hint):
    write_shards(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    kwargs["source"] = kwargs["source"].replace("*", str(tmp_path / "*"))
    with pytest.raises(ImportError, match=hint):
        read_corpus(**kwargs)
