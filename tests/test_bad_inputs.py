"""The bad-input catalogue: each entry is an input a user can get wrong, through the CLI as they
would type it or the API as they would call it. Each asserts the error (for the CLI: a clean
exit, status 2, no traceback), a message that names the input and what is accepted, that
nothing is left on disk, and, where the input can be checked first, that no work ran before the
check (grow it as the product grows)."""

import json
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from elmo_tf import cli
from elmo_tf.training import run_directory
from tests.conftest import CPU_ONLY_ENV, kill_when


def _cli_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def _no_corpus_pass(monkeypatch):
    """A counting pass over the corpus fails the test: the check must come before it."""
    def counting(*args, **kwargs):
        raise AssertionError("the corpus was read before the bad input was reported")

    monkeypatch.setattr(run_directory, "build_vocabulary", counting)


@pytest.mark.parametrize("vocab, expected", [
    ("missing.txt", ["missing.txt", "no such vocabulary file"]),
    ("a_directory", ["a_directory", "is a directory", "one token per line"]),
    ("no_specials.txt", ["no_specials.txt", "<S>"]),
])
def test_train_checks_the_vocabulary_before_any_work(tmp_path, capsys, monkeypatch, vocab,
                                                      expected):
    (tmp_path / "a_directory").mkdir()
    (tmp_path / "no_specials.txt").write_text("the\ncat\n")
    (tmp_path / "corpus.txt").write_text("the cat sat\n" * 20)
    _no_corpus_pass(monkeypatch)
    output = tmp_path / "run"
    message = _cli_error(capsys, "train", "--recipe", "tiny", "--corpus",
                         str(tmp_path / "corpus.txt"), "--vocab", str(tmp_path / vocab),
                         "--output", str(output))
    for part in expected:
        assert part in message, message
    assert not os.path.exists(output)  # nothing written


# --- A full disk ---------------------------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "bin" / "elmo-tf"


@pytest.fixture
def full_disk(monkeypatch):
    """Every file system reports 4 kB free (the checks before writing must refuse)."""
    usage = shutil.disk_usage(os.getcwd())
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=4096))


def _sentences(tmp_path, n=300):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"the cat sat on mat {i}\n" for i in range(n)), encoding="utf-8")
    return str(path)


def _files_under(path):
    return sorted(os.path.relpath(os.path.join(root, f), path)
                  for root, _, names in os.walk(path) for f in names)


def _limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then a write past the limit fails: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))


def test_dump_whose_writes_fail_exits_cleanly_and_leaves_nothing(tiny_model, tmp_path):
    """A write that fails mid-file (a file-size limit here, a full disk for users): HDF5's own
    writer answered it with thousands of ignored exceptions and a segfault."""
    _, _, options_file, _ = tiny_model
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), "dump", _sentences(tmp_path), str(out / "vec.hdf5"),
         "--model", str(options_file.parent)], preexec_fn=_limit_file_size,
        env=dict(os.environ, **CPU_ONLY_ENV), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert f"writing {out / 'vec.hdf5'} failed" in done.stderr and "File too large" in done.stderr
    assert _files_under(out) == []


def test_dump_to_a_full_disk_is_refused_before_work(tiny_model, tmp_path, capsys, full_disk):
    _, _, options_file, _ = tiny_model
    out = tmp_path / "out"
    out.mkdir()
    message = _cli_error(capsys, "dump", _sentences(tmp_path), str(out / "vec.hdf5"),
                         "--model", str(options_file.parent))
    assert f"{out / 'vec.hdf5'} needs about" in message and "4,096 bytes free" in message
    assert _files_under(out) == []


def test_export_to_a_full_disk_is_refused(tiny_model, tmp_path, capsys, full_disk):
    _, _, options_file, weight_file = tiny_model
    base = tmp_path / "serving"
    message = _cli_error(capsys, "export", "--options", str(options_file), "--weights",
                         str(weight_file), "--output", str(base))
    assert f"the SavedModel {base / '1'} needs about" in message
    assert _files_under(base) == [] and os.listdir(base) == []


def test_train_on_a_full_disk_stops_cleanly_at_its_checkpoint(tmp_path, capsys, monkeypatch):
    """The run's small records are written; the checkpoint is refused with the space it needs,
    and no temporary is left."""
    corpus = _sentences(tmp_path, n=60)
    output = tmp_path / "run"
    usage = shutil.disk_usage(os.getcwd())
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: usage._replace(free=4096)
                        if str(path).startswith(str(output)) else real(path))
    message = _cli_error(capsys, "train", "--recipe", "tiny", "--corpus", corpus, "--steps", "2",
                         "--checkpoint-every", "1", "--output", str(output))
    assert "ckpt-000000001.weights.h5 needs about" in message
    assert not [f for f in _files_under(output) if ".tmp" in f or f.startswith("checkpoints")]


def test_train_whose_checkpoint_write_fails_exits_cleanly_and_leaves_nothing(tmp_path):
    """The checkpoint passes the free-space check, then its write fails mid-file (a file-size
    limit here; a disk that fills up meanwhile for users): Keras's HDF5 writer answered that
    with tracebacks and a segfault."""
    corpus = _sentences(tmp_path, n=60)
    output = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), "train", "--recipe", "tiny", "--corpus", corpus,
         "--steps", "1", "--output", str(output)], preexec_fn=_limit_file_size,
        env=dict(os.environ, **CPU_ONLY_ENV), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    checkpoint = output / "checkpoints" / "ckpt-000000001.weights.h5"
    assert f"writing {checkpoint} failed" in done.stderr and "File too large" in done.stderr
    assert not [f for f in _files_under(output) if ".tmp" in f or f.startswith("checkpoints")]


# --- kill -9 ------------------------------------------------------------------------------

def _kill_commands(tmp_path, tiny_model):
    """{name: (elmo-tf arguments, the name (a regex) of the file or directory whose write is
    stalled, where it goes, its temporaries' name, the final files the finished command
    leaves)}: one write of each command that writes files."""
    from tests.training import RECIPE

    _, _, options_file, weight_file = tiny_model
    sentences = _sentences(tmp_path, n=20)
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps(RECIPE))
    bilm = tmp_path / "bilm"
    assert cli.main(["init", "--preset", "tiny", "--output", str(bilm)]) == 0
    labelled = tmp_path / "train.tsv"
    labelled.write_text("pos\ta good film\nneg\ta bad film\npos\tgood\nneg\tbad\n")
    out = tmp_path / "out"
    return {
        "dump": (["dump", sentences, str(out / "vec.hdf5"), "--model", str(bilm)],
                 r"vec\.hdf5", out, r"vec\.hdf5", {"vec.hdf5"}),
        "export": (["export", "--options", str(options_file), "--weights", str(weight_file),
                    "--output", str(out)], "1", out, r"\.export", {"1/saved_model.pb"}),
        "train": (["train", "--recipe", str(recipe), "--corpus", sentences, "--steps", "2",
                   "--checkpoint-every", "1", "--output", str(out)],
                  r"ckpt-0+1\.weights\.h5", out / "checkpoints", r"ckpt-0+1\.weights\.h5",
                  {"checkpoints/ckpt-000000001.weights.h5", "weights.hdf5", "run.json"}),
        "finetune": (["finetune", "--task", "classify", "--train", str(labelled), "--dev",
                      str(labelled), "--model", str(bilm), "--encoder-units", "4", "--epochs",
                      "2", "--output", str(out)],
                     r"epoch-001\.weights\.h5", out / "checkpoints", r"epoch-001\.weights\.h5",
                     {"checkpoints/epoch-002.weights.h5", "model.keras", "dev_metrics.json"}),
    }


@pytest.mark.parametrize("command", ["dump", "export", "train", "finetune"])
def test_killed_while_writing_then_run_again_at_once_leaves_only_the_final_files(
        tiny_model, tmp_path, command):
    """kill -9 while the command writes a file (or a SavedModel directory), then the same
    command at once: the dead writer's temporary, unlocked now, goes whatever its age, and only
    the command's final files remain."""
    args, stalled, where, name, final = _kill_commands(tmp_path, tiny_model)[command]
    env = dict(os.environ, **CPU_ONLY_ENV)
    process = subprocess.Popen([sys.executable, "-m", "tests.stalled_writer", stalled, *args],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    temporary = re.compile(rf"{name}\..+\.tmp")
    kill_when(process, lambda: os.path.isdir(where) and any(
        temporary.fullmatch(n) for n in os.listdir(where)), timeout=300)
    _, err = process.communicate()
    assert process.returncode == -signal.SIGKILL, (
        f"it ended (exit {process.returncode}) before it was killed: {err.decode()[-2000:]}")
    assert any(temporary.fullmatch(name) for name in os.listdir(where))
    again = subprocess.run([sys.executable, str(LAUNCHER), *args], env=env,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    left = _files_under(tmp_path / "out")
    assert not [f for f in left if ".tmp" in f], left
    assert final <= set(left), left


def test_a_binary_corpus_is_refused_after_the_counting_pass(tmp_path, capsys):
    """Mostly not UTF-8 (a binary file): refused, not trained on the few lines that decode."""
    corpus = tmp_path / "model.bin"
    rng = np.random.default_rng(0)
    lines = [bytes(rng.integers(128, 256, 40, dtype="uint8")) for _ in range(30)]
    corpus.write_bytes(b"\n".join(lines[:28] + [b"the cat sat", b"on the mat"]) + b"\n")
    output = tmp_path / "run"
    message = _cli_error(capsys, "train", "--recipe", "tiny", "--corpus", str(corpus),
                         "--steps", "1", "--output", str(output))
    assert f"{corpus}: 28 of 30 lines are not valid UTF-8" in message
    assert "one sentence per line" in message
    assert not [f for f in _files_under(output) if f.startswith("checkpoints") or ".tmp" in f
                or f.endswith(".h5") or f.endswith(".hdf5")]


# --- Python inputs to ElmoEmbedding ---------------------------------------------------------

@pytest.fixture(scope="module")
def embedding():
    from elmo_tf import ElmoBackbone, ElmoConfig
    from elmo_tf.models.elmo_embedding import ElmoEmbedding

    return ElmoEmbedding(ElmoBackbone(ElmoConfig.from_preset("tiny")))


@pytest.mark.parametrize("inputs, message", [
    ("the cat sat", r"got one string \('the cat sat'\); ELMo takes a batch of tokenized "
                    r"sentences"),
    ([["a", "b"], "c"], r"tokens mix nesting depths \[1, 2\]: a batch is a list of sentences"),
    ([[[1] * 50], [[1] * 50, [2] * 50]], "neither str tokens nor a rectangular array of ints"),
    ([[[0.5] * 50]], "neither str tokens nor a rectangular array of ints"),
])
def test_elmo_embedding_names_what_a_batch_is(embedding, inputs, message):
    with pytest.raises(ValueError, match=message):
        embedding(inputs)


def test_elmo_embedding_takes_char_ids_as_nested_lists(embedding):
    from elmo_tf import tokens_to_char_ids

    ids = tokens_to_char_ids([["a", "cat"], ["hi", ""]])
    np.testing.assert_array_equal(embedding(np.asarray(ids).tolist()), embedding(ids))
