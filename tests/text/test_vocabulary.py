"""Vocabulary: bilm-tf's file format, byte for byte, and errors that name the file and line."""

import pytest

from elmo_tf.text.vocabulary import Vocabulary

SPECIALS = ["<S>", "</S>", "<UNK>"]


def test_save_load_round_trip_is_byte_exact(tmp_path):
    vocab = Vocabulary(SPECIALS + ["the", "wörld", "東京", "🙂", "\ufffd"])
    path = tmp_path / "sub" / "vocab.txt"
    vocab.save(path)
    data = path.read_bytes()
    assert data == "\n".join(vocab.tokens).encode("utf-8") + b"\n"
    loaded = Vocabulary.load(path)
    assert loaded.tokens == vocab.tokens and loaded.counts is None
    loaded.save(tmp_path / "again.txt")
    assert (tmp_path / "again.txt").read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ["vocab.txt"]  # no temp file left


def test_load_accepts_bilm_tf_order_crlf_and_a_count_column(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"</S>\r\n<S>\r\n<UNK>\r\nthe\r\n")
    vocab = Vocabulary.load(path)
    assert vocab.tokens == ["</S>", "<S>", "<UNK>", "the"]
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (1, 0, 2)
    path.write_text("<S> 9\n</S>\t9\n<UNK> 0\nthe  123\n", encoding="utf-8")
    vocab = Vocabulary.load(path)
    assert vocab.tokens == SPECIALS + ["the"] and vocab.counts == [9, 9, 0, 123]


@pytest.mark.parametrize("text, message", [
    ("", "is empty"),
    ("<S>\n</S>\nthe\n", "missing special token.*<UNK>"),
    ("the\n", "missing special token.*<S>, </S>, <UNK>"),
    ("<S>\n</S>\n<UNK>\nthe\ncat\nthe\n", "duplicate token 'the' on lines 4 and 6"),
    ("<S>\n</S>\n\n<UNK>\n", ":3: .*an empty line"),
    ("<S>\n</S>\n<UNK>\nNew York\n", ":4: expected 'TOKEN' or 'TOKEN COUNT'"),
])
def test_load_errors_name_the_file_and_the_problem(tmp_path, text, message):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        Vocabulary.load(path)
    assert str(path) in str(info.value)


def test_constructor_rejects_what_the_file_format_cannot_hold():
    with pytest.raises(ValueError, match="duplicate token 'a' at positions 3 and 4"):
        Vocabulary(SPECIALS + ["a", "a"])
    with pytest.raises(ValueError, match="missing special token"):
        Vocabulary(["<S>", "a"])
    with pytest.raises(ValueError, match="no space"):
        Vocabulary(SPECIALS + ["a b"])
