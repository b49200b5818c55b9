"""The bad-input catalogue: each entry is an input a user can get wrong, through the CLI as they
would type it or the API as they would call it. Each asserts the error (for the CLI: a clean
exit, status 2, no traceback), a message that names the input and what is accepted, that
nothing is left on disk, and, where the input can be checked first, that no work ran before the
check (grow it as the product grows)."""

import functools
import io
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from elmo_tf import cli
from elmo_tf.training import run_directory
from tests import subprocesses
from tests.conftest import CPU_ONLY_ENV, kill_while_writing


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
LAUNCHER = ["-m", "elmo_tf_launcher"]  # the installed `elmo-tf`


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
    done = subprocesses.run(
        [sys.executable, *LAUNCHER, "dump", _sentences(tmp_path), str(out / "vec.hdf5"),
         "--model", str(options_file.parent)], preexec_fn=_limit_file_size,
        env=dict(os.environ, **CPU_ONLY_ENV), capture_output=True, text=True, seconds=600,
        what="dump on a full disk")
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
    done = subprocesses.run(
        [sys.executable, *LAUNCHER, "train", "--recipe", "tiny", "--corpus", corpus,
         "--steps", "1", "--output", str(output)], preexec_fn=_limit_file_size,
        env=dict(os.environ, **CPU_ONLY_ENV), capture_output=True, text=True, seconds=600,
        what="train on a full disk")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    checkpoint = output / "checkpoints" / "ckpt-000000001.weights.h5"
    assert f"writing {checkpoint} failed" in done.stderr and "File too large" in done.stderr
    assert not [f for f in _files_under(output) if ".tmp" in f or f.startswith("checkpoints")]


# --- kill -9 ------------------------------------------------------------------------------

def _kill_commands(tmp_path, tiny_model):
    """{name: (elmo-tf arguments, the name (a regex) of the file or directory whose write is
    stalled, where it goes, its temporaries' name, the final files the finished command
    leaves)}: one write of each command that writes files (`train`'s: test_resume.py)."""
    _, _, options_file, weight_file = tiny_model
    sentences = _sentences(tmp_path, n=20)
    bilm = tmp_path / "bilm"
    assert cli.main(["init", "--preset", "tiny", "--output", str(bilm)]) == 0
    labelled = tmp_path / "train.tsv"
    labelled.write_text("pos\ta good film\nneg\ta bad film\npos\tgood\nneg\tbad\n")
    out = tmp_path / "out"
    return {
        # The new model directory, staged whole beside it, held before its one rename.
        "init": (["init", "--preset", "tiny", "--output", str(out)], "out", tmp_path, "out",
                 {"options.json", "weights.hdf5", "config.json", "metadata.json",
                  "model.weights.h5", "tokenizer.json"}),
        "dump": (["dump", sentences, str(out / "vec.hdf5"), "--model", str(bilm)],
                 r"vec\.hdf5", out, r"vec\.hdf5", {"vec.hdf5"}),
        "export": (["export", "--options", str(options_file), "--weights", str(weight_file),
                    "--output", str(out)], "1", out, "1", {"1/saved_model.pb"}),
        "finetune": (["finetune", "--task", "classify", "--train", str(labelled), "--dev",
                      str(labelled), "--model", str(bilm), "--encoder-units", "4", "--epochs",
                      "2", "--output", str(out)],
                     r"epoch-001\.weights\.h5", out / "checkpoints", r"epoch-001\.weights\.h5",
                     {"checkpoints/epoch-002.weights.h5", "task.json", "task.weights.h5",
                      "model.weights.h5", "dev_metrics.json"}),
    }


@pytest.mark.parametrize("command", ["init", "dump", "export", "finetune"])
def test_killed_while_writing_then_run_again_at_once_leaves_only_the_final_files(
        tiny_model, tmp_path, command, monkeypatch):
    """kill -9 while the command writes a file (or a SavedModel directory), then the same
    command at once (in this process: what is tested of it is not a process of its own): the
    dead writer's temporary, unlocked now, goes whatever its age, and only the command's final
    files remain. (`train`, killed while it writes a checkpoint: `tests/training/test_resume.py`,
    whose rerun resumes from the checkpoint before.)"""
    args, stalled, where, name, final = _kill_commands(tmp_path, tiny_model)[command]
    scratch = tmp_path / "tmpdir"  # TMPDIR: where TensorFlow's AutoGraph writes its files
    scratch.mkdir()
    env = dict(os.environ, **CPU_ONLY_ENV, TMPDIR=str(scratch))
    temporary = re.compile(rf"{name}\..+\.tmp")
    process = kill_while_writing(args, stalled, where, temporary, subprocesses.limit(300),
                                 cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
    _, err = process.communicate()
    assert process.returncode == -signal.SIGKILL, (
        f"it ended (exit {process.returncode}) before it was killed: {err.decode()[-2000:]}")
    assert any(temporary.fullmatch(name) for name in os.listdir(where))
    assert os.listdir(scratch)  # its private temporary directory, left by the kill
    # (On a GPU host this rerun may use the GPU, where the killed run did not: nothing asserted
    # here depends on the device.)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the killed process's TMPDIR
    assert cli.main_process(args) == 0
    assert not [n for n in os.listdir(where) if temporary.fullmatch(n)], os.listdir(where)
    left = _files_under(tmp_path / "out")
    assert not [f for f in left if ".tmp" in f], left
    assert final <= set(left), left
    # What the killed process left in TMPDIR (its files, AutoGraph's generated ones when it had
    # converted a user's function) went with its private directory; the rerun's own at its end.
    assert _files_under(scratch) == [] and os.listdir(scratch) == []


def test_finetune_of_a_model_whose_run_json_is_no_record_is_refused_by_name(tmp_path, capsys):
    """`finetune --model DIR` reads the tokenizer DIR's run (if any) was trained with from its
    run.json: one that is not a run's record is named, not an AttributeError."""
    bilm = tmp_path / "bilm"
    assert cli.main(["init", "--preset", "tiny", "--output", str(bilm)]) == 0
    (bilm / "run.json").write_text("[1, 2]")
    labelled = tmp_path / "train.tsv"
    labelled.write_text("pos\ta good film\nneg\ta bad film\n")
    message = _cli_error(capsys, "finetune", "--task", "classify", "--train", str(labelled),
                         "--dev", str(labelled), "--model", str(bilm), "--output",
                         str(tmp_path / "out"))
    assert f"{bilm / 'run.json'}: not a run's record" in message, message
    assert not (tmp_path / "out").exists()


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


# --- Nothing of the user's lost, one process per run ---------------------------------------

USERS_FILES = ["my.notes.tmp", "backup.2024.tmp", "results.old.tmp/data.csv"]


def _put_users_files(directory):
    for name in USERS_FILES:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text("mine")


def _users_files_intact(directory):
    return all((directory / name).read_text() == "mine" for name in USERS_FILES)


def _recipe_file(directory):
    from tests.training import RECIPE

    path = directory / "recipe.json"
    path.write_text(json.dumps(RECIPE))
    return str(path)


def _labelled(directory):
    path = directory / "train.tsv"
    path.write_text("pos\ta good film\nneg\ta bad film\npos\tgood\nneg\tbad\n")
    return str(path)


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """A biLM trained 2 steps (checkpoints at 1 and 2) and a classifier fine-tuned on it, each
    in an --output that held the user's own `*.tmp` files and folder from the start (a train
    that failed on a missing corpus first)."""
    tmp_path = tmp_path_factory.mktemp("finetuned")
    bilm, classifier = tmp_path / "bilm", tmp_path / "classifier"
    for directory in (bilm, classifier):
        _put_users_files(directory)
    train = ["train", "--recipe", _recipe_file(tmp_path), "--output", str(bilm), "--steps", "2",
             "--checkpoint-every", "1"]
    with pytest.raises(SystemExit):
        cli.main(train + ["--corpus", str(tmp_path / "missing-*.txt")])
    corpus = _sentences(tmp_path, n=40)
    assert cli.main(train + ["--corpus", corpus]) == 0
    labelled = _labelled(tmp_path)
    finetune = ["finetune", "--task", "classify", "--train", labelled, "--dev", labelled,
                "--model", str(bilm), "--encoder-units", "4", "--output", str(classifier)]
    assert cli.main(finetune + ["--epochs", "1"]) == 0
    return {"bilm": bilm, "classifier": classifier, "train": train, "finetune": finetune,
            "labelled": labelled, "corpus": corpus}


def test_the_users_tmp_files_and_folders_survive_train_and_finetune(finetuned):
    """The issue's names: `train` and `finetune` deleted them at start-up (a run directory's
    cleaning took every unlocked `*.*.tmp` for a temporary), even when the command then failed."""
    for directory in (finetuned["bilm"], finetuned["classifier"]):
        assert _users_files_intact(directory), _files_under(directory)
    assert (finetuned["bilm"] / "weights.hdf5").exists()
    assert (finetuned["classifier"] / "task.json").exists()
    assert not (finetuned["bilm"] / "run.lock").exists()  # released with the run


def _wait_for(condition, process, timeout=300):
    import time

    deadline = time.monotonic() + subprocesses.limit(timeout)
    while not condition():
        assert process.poll() is None, process.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_two_trains_in_one_directory_one_is_refused_and_the_others_run_is_intact(
        tmp_path, capsys):
    """Started together, both used to exit 0 with a mixed directory (run.json of one,
    checkpoints of the other). Now the second is refused, naming the first, which holds the
    directory until it ends, however it ends: killed -9, its rerun resumes its own run."""
    out = tmp_path / "run"
    command = ["train", "--recipe", _recipe_file(tmp_path), "--corpus",
               _sentences(tmp_path, n=40), "--output", str(out), "--checkpoint-every", "1"]
    first = command + ["--seed", "1", "--steps", "2"]
    process = subprocess.Popen(  # stalled while it writes its first checkpoint
        [sys.executable, "-m", "tests.stalled_writer", r"ckpt-0+1\.weights\.h5", *first],
        cwd=ROOT, env=dict(os.environ, **CPU_ONLY_ENV), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: os.path.isdir(out / "checkpoints") and any(
            n.startswith("ckpt-000000001") for n in os.listdir(out / "checkpoints")), process)
        message = _cli_error(capsys, *command, "--seed", "2", "--steps", "1")
        assert f"{out} is in use by another elmo-tf process (process {process.pid} on " in message
        assert "train" in message and "wait until it ends" in message
        assert json.loads((out / "run.json").read_text())["settings"]["seed"] == 1
    finally:
        process.kill()
        process.wait()
    assert cli.main(first) == 0  # the lock died with the process
    assert json.loads((out / "run.json").read_text())["settings"]["seed"] == 1
    assert (out / "checkpoints" / "ckpt-000000002.weights.h5").exists()
    # Killed while it wrote its first checkpoint (none complete), the run started again: the
    # dead writer's temporary is gone, and the run's final files are there.
    left = _files_under(out)
    assert not [f for f in left if ".tmp" in f], left
    assert {"weights.hdf5", "run.json", "checkpoints/ckpt-000000001.weights.h5"} <= set(left)


def test_a_model_that_is_no_bilm_is_named_by_every_command_that_reads_one(finetuned, tmp_path,
                                                                          capsys):
    """A fine-tuned task model, a missing directory or one without the biLM's files, given as
    a biLM's --model: one line naming it (before: a bare `[Errno 2] No such file or directory:
    '.../options.json'`); a task model's names the biLM it was fine-tuned from."""
    classifier, missing, empty = finetuned["classifier"], tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    sentences = _sentences(tmp_path, n=2)
    for command in (["embed", "--input", sentences, "--output", str(tmp_path / "v.hdf5")],
                    ["dump", sentences, str(tmp_path / "v.hdf5")],
                    finetuned["finetune"][:7] + ["--output", str(tmp_path / "task")]):
        for model, expected in (
                (classifier, f"--model {classifier} is a fine-tuned task model (task.json), not "
                             f"a biLM: give the biLM it was fine-tuned from ({finetuned['bilm']});"
                             " `predict` and `export` take the task model."),
                (missing, f"--model {missing}: no such directory"),
                (empty, f"--model {empty} lacks options.json")):
            assert expected in _cli_error(capsys, *command, "--model", str(model)), command
    # An empty sentence file, given a biLM: refused by name (it used to write a file of 0
    # sentences and report it).
    none = tmp_path / "none.txt"
    none.write_text("")
    for command in (["dump", str(none), str(tmp_path / "v.hdf5")],
                    ["embed", "--input", str(none), "--output", str(tmp_path / "v.hdf5")]):
        assert f"{none} has no lines: give one sentence per line" in _cli_error(
            capsys, *command, "--model", str(finetuned["bilm"])), command
    # An output that is a directory: named before any work (it was the rename's bare
    # `[Errno 21] Is a directory` after embedding everything).
    for command, flag in ((["dump", sentences, str(tmp_path)], "output"),
                          (["embed", "--input", sentences, "--output", str(tmp_path)],
                           "--output")):
        assert f"{flag} {tmp_path} is a directory: give the path of the .hdf5 file" in \
            _cli_error(capsys, *command, "--model", str(finetuned["bilm"])), command
    assert not (tmp_path / "v.hdf5").exists() and not (tmp_path / "task").exists()


def test_a_finetune_in_a_directory_another_run_holds_is_refused(finetuned, tmp_path, capsys):
    from elmo_tf.training.run_directory import RunDirectory

    out = tmp_path / "classifier"
    with RunDirectory(out).opened():  # another run holds it (this process, another lock)
        message = _cli_error(capsys, *finetuned["finetune"][:-2], "--output", str(out),
                             "--epochs", "1")
    assert f"{out} is in use by another elmo-tf process (process {os.getpid()} on " in message
    assert os.listdir(out) == []


def test_a_run_resumes_from_another_working_directory_and_after_it_moved(
        finetuned, tmp_path, capsys, monkeypatch):
    """A run's corpus is its files (resolved, with their sizes), not the glob typed: the same
    run resumes from another working directory by a relative glob, after its directory moved;
    a corpus file that changed size is another run."""
    moved = tmp_path / "moved"
    shutil.copytree(finetuned["bilm"], moved)
    corpus = pathlib.Path(finetuned["corpus"])
    monkeypatch.chdir(corpus.parent.parent)
    command = ["train", "--recipe", _recipe_file(tmp_path), "--output", str(moved),
               "--checkpoint-every", "1"]
    assert cli.main(command + ["--corpus", os.path.join(corpus.parent.name, "*.txt"),
                               "--steps", "3"]) == 0
    assert f"resuming {moved} at step 2" in capsys.readouterr().err
    text = corpus.read_text()
    try:
        corpus.write_text(text + "one more line\n")
        message = _cli_error(capsys, *command, "--corpus", str(corpus), "--steps", "4")
    finally:
        corpus.write_text(text)
    assert f"the corpus of the run in {moved} changed since the run started (corpus[0]: " \
           in message and "'bytes'" in message


def test_a_run_recorded_by_its_glob_resumes_when_the_glob_names_the_same_files(
        finetuned, tmp_path, capsys, monkeypatch):
    """elmo-tf 0.2 recorded the corpus as the glob typed: such a run resumes (and is recorded
    anew) when the glob still names the same files; a recorded `.../corpus/train/*` of the
    user's is not taken for the run's own built-in corpus."""
    run = tmp_path / "old"
    shutil.copytree(finetuned["bilm"], run)
    record = json.loads((run / "run.json").read_text())
    corpus = pathlib.Path(finetuned["corpus"])
    monkeypatch.chdir(corpus.parent)
    record["settings"]["corpus"] = corpus.name  # relative, as typed
    (run / "run.json").write_text(json.dumps(record))
    command = ["train", "--recipe", _recipe_file(tmp_path), "--output", str(run),
               "--checkpoint-every", "1", "--corpus", str(corpus)]
    assert cli.main(command + ["--steps", "3"]) == 0
    assert f"resuming {run} at step 2" in capsys.readouterr().err
    recorded = json.loads((run / "run.json").read_text())["settings"]["corpus"]
    assert recorded == [{"file": str(corpus.resolve()), "bytes": corpus.stat().st_size}]
    record["settings"]["corpus"] = "data/corpus/train/*"
    (run / "run.json").write_text(json.dumps(record))
    message = _cli_error(capsys, "train", *command[1:-1], "builtin", "--steps", "4")
    assert "changed since the run started" in message and "'data/corpus/train/*'" in message


def test_a_built_in_corpus_run_resumes_after_its_directory_moved(tmp_path, capsys,
                                                                 monkeypatch):
    """Its corpus is written inside the run; moved, the run was told to "delete it" (its
    checkpoints with it), as its recorded corpus was the old directory's path. (The run is
    finished when it is run again: the corpus is checked before the steps left are.) The
    built-in corpus is written smaller than its 30,000 sentences: each of the three runs
    evaluates its held-out part, and what is checked does not depend on its size."""
    monkeypatch.setattr(run_directory, "write_generated_corpus", functools.partial(
        run_directory.write_generated_corpus, n_sentences=1_000, n_heldout=50, n_shards=2))
    first, moved = tmp_path / "first", tmp_path / "moved"
    command = ["train", "--recipe", _recipe_file(tmp_path), "--corpus", "builtin",
               "--checkpoint-every", "1", "--steps", "1"]
    assert cli.main(command + ["--output", str(first)]) == 0
    first.rename(moved)
    capsys.readouterr()
    assert cli.main(command + ["--output", str(moved)]) == 0
    assert f"{moved} has already trained its 1 steps" in capsys.readouterr().err
    # As elmo-tf 0.2 recorded it: the corpus's path in the directory where the run began.
    record = json.loads((moved / "run.json").read_text())
    record["settings"]["corpus"] = str(first / "corpus" / "train" / "*")
    (moved / "run.json").write_text(json.dumps(record))
    assert cli.main(command + ["--output", str(moved)]) == 0
    assert f"{moved} has already trained its 1 steps" in capsys.readouterr().err
    assert (moved / "checkpoints" / "ckpt-000000001.weights.h5").exists()


# --- Every error one line that names the input ---------------------------------------------

def test_a_broken_link_or_an_unreadable_file_in_a_corpus_glob_is_named_before_any_work(
        tmp_path, capsys, monkeypatch):
    from elmo_tf.data import corpus as corpus_module

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat\n" * 20)
    (corpus / "b.txt").symlink_to(tmp_path / "gone.txt")
    out = tmp_path / "run"
    train = ["train", "--recipe", "tiny", "--corpus", str(corpus / "*.txt"), "--output", str(out)]
    message = _cli_error(capsys, *train)
    assert f"corpus file {corpus / 'b.txt'} (matched by '{corpus / '*.txt'}') is a broken " \
           f"symbolic link (to {tmp_path / 'gone.txt'}" in message
    assert not out.exists()
    (corpus / "b.txt").unlink()
    (corpus / "b.txt").write_text("a dog ran\n")
    real_open = open

    def unreadable(path, *args, **kwargs):  # root reads every file: the refusal is simulated
        if os.fspath(path) == str(corpus / "b.txt"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(corpus_module, "open", unreadable, raising=False)
    message = _cli_error(capsys, *train)
    assert f"corpus file {corpus / 'b.txt'}" in message and "cannot be read: Permission " \
                                                          "denied" in message
    assert not out.exists()
    # A URL: read through TensorFlow's file systems; one it cannot read (a scheme it lacks, or
    # a host it cannot reach: a traceback before) is named in one line.
    message = _cli_error(capsys, *train[:4], "s3://bucket/*.txt", *train[5:])
    assert "corpus 's3://bucket/*.txt' cannot be read: File system scheme 's3' not " \
           "implemented" in message
    assert not out.exists()


def test_a_train_that_fails_on_its_corpus_leaves_no_output_directory(tmp_path, capsys):
    """The corpus (a TFDS dataset) is found missing once the run has its directory: the
    directory the run made goes with the failure (it used to stay, empty)."""
    pytest.importorskip("tensorflow_datasets")
    out = tmp_path / "run"
    message = _cli_error(capsys, "train", "--recipe", "tiny", "--corpus", "tfds:lm1b",
                         "--tfds-data-dir", str(tmp_path / "tfds"), "--output", str(out))
    assert "'lm1b' is not prepared" in message
    assert not out.exists()


def test_tensorflows_error_from_reading_an_input_is_one_line_naming_the_file(
        tmp_path, capsys, monkeypatch):
    """A file that goes while a pipeline reads it (the up-front check left out here, so that
    the pipeline meets the broken link): TensorFlow's error, caught at the command line."""
    from elmo_tf.data import corpus as corpus_module

    monkeypatch.setattr(corpus_module, "_check_readable", lambda path, patterns: None)
    (tmp_path / "a.txt").write_text("the cat sat\n")
    (tmp_path / "b.txt").symlink_to(tmp_path / "gone.txt")
    message = _cli_error(capsys, "vocab", "--corpus", str(tmp_path / "*.txt"), "--output",
                         str(tmp_path / "vocab.txt"))
    error = message.splitlines()[-1]
    assert error == f"elmo-tf: error: reading the input failed: {tmp_path / 'b.txt'}; No such " \
                    "file or directory", message
    assert not (tmp_path / "vocab.txt").exists()


@pytest.mark.parametrize("case, expected", [
    ("list", "options.json: expected a JSON object with the sections 'lstm' and 'char_cnn' (an "
             "options.json); got a JSON array."),
    ("null_filters", "options.json: char_cnn.filters must be a list of [width, n_filters] "
                     "pairs, e.g. [[1, 32], [2, 32]]; got null."),
    ("swapped", "weights.hdf5: an HDF5 file, not JSON (weights given where a JSON file "
                "belongs? e.g. --options and --weights swapped)."),
    ("weights_json", "options.json: cannot read it as an hdf5 weight file"),
])
def test_options_and_weights_files_are_checked_by_name(tiny_model, tmp_path, capsys, case,
                                                       expected):
    options, _, options_file, weight_file = tiny_model
    bad = tmp_path / "options.json"
    if case == "list":
        bad.write_text("[1, 2]")
    elif case == "null_filters":
        bad.write_text(json.dumps({**options, "char_cnn": {**options["char_cnn"],
                                                            "filters": None}}))
    files = {"list": (bad, weight_file), "null_filters": (bad, weight_file),
             "swapped": (weight_file, options_file),
             "weights_json": (options_file, options_file)}[case]
    message = _cli_error(capsys, "dump", _sentences(tmp_path, n=2), str(tmp_path / "v.hdf5"),
                         "--options", str(files[0]), "--weights", str(files[1]))
    assert expected in message and message.count("\n") == 1, message
    if case == "weights_json":
        assert "--options and --weights swapped" in message
    assert not (tmp_path / "v.hdf5").exists()


def test_a_truncated_newest_checkpoint_is_named_and_the_run_resumes_from_the_one_before(
        finetuned, tmp_path, capsys):
    run = tmp_path / "bilm"
    shutil.copytree(finetuned["bilm"], run)
    newest = run / "checkpoints" / "ckpt-000000002.weights.h5"
    newest.write_bytes(newest.read_bytes()[:newest.stat().st_size // 2])
    train = finetuned["train"].copy()
    train[train.index("--output") + 1] = str(run)
    train[train.index("--steps") + 1] = "3"
    assert cli.main(train + ["--corpus", finetuned["corpus"]]) == 0
    err = capsys.readouterr().err
    assert f"{newest} is damaged (" in err and f"resuming {run} at step 1" in err
    # Every checkpoint damaged: named, and nothing trained from the start behind the user's back.
    for path in (run / "checkpoints").iterdir():
        path.write_bytes(b"")
    train[train.index("--steps") + 1] = "4"
    message = _cli_error(capsys, *train, "--corpus", finetuned["corpus"])
    assert f"every checkpoint in {run / 'checkpoints'} is damaged" in message


def test_a_truncated_finetune_checkpoint_is_named(finetuned, tmp_path, capsys):
    out = tmp_path / "classifier"
    shutil.copytree(finetuned["classifier"], out)
    checkpoint = out / "checkpoints" / "epoch-001.weights.h5"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    message = _cli_error(capsys, *finetuned["finetune"][:-2], "--output", str(out),
                         "--epochs", "2")
    assert f"{checkpoint}, the checkpoint of epoch 1, is damaged" in message


DAMAGED_FINETUNING_RECORDS = [  # (a field's damage, the words the refusal names)
    ({"epochs": {"1": 0.5}}, '"epochs" is {\'1\': 0.5}'), ({"epochs": None}, '"epochs" is None'),
    ({"epochs": [{"accuracy": "0.5"}]}, '"epochs" 1 is {\'accuracy\': \'0.5\'}'),
    ({"epochs": [{"loss": 0.5}]}, '"epochs" 1\'s \'accuracy\' is missing'),
    ({"epochs": ["0.5"]}, '"epochs" 1 is \'0.5\''), ({"metric": "f1"}, '"metric" is \'f1\''),
    ({"settings": {"word_embedding_dim": "8"}}, '"settings.word_embedding_dim" is \'8\''),
]


@pytest.mark.parametrize("damage, named", DAMAGED_FINETUNING_RECORDS)
def test_a_damaged_finetune_record_is_refused_by_name_and_left_as_it_is(finetuned, tmp_path,
                                                                        capsys, damage, named):
    """A fine-tuning run.json edited by hand or damaged in the fields a run resumes from: named
    (the file, the field, what `finetune` writes), not a KeyError or TypeError, and nothing in
    the directory changed."""
    out = tmp_path / "classifier"
    shutil.copytree(finetuned["classifier"], out)
    record = json.loads((out / "run.json").read_text())
    assert record["metric"] == "accuracy"  # (the damage's names assume it)
    damage = {k: {**record[k], **v} if k == "settings" else v for k, v in damage.items()}
    (out / "run.json").write_text(json.dumps({**record, **damage}))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    message = _cli_error(capsys, *finetuned["finetune"][:-2], "--output", str(out),
                         "--epochs", "2")
    assert f"{out / 'run.json'}: {named}, where `elmo-tf finetune` writes " in message, message
    assert f"or fine-tune again into another --output than {out}" in message
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_the_record_checks_take_every_record_the_commands_write():
    """What `finetune` writes (a new run's record, NaN and whole-number scores, a classifier's
    word features) and what `train` writes (a count of any size) pass the checks."""
    from elmo_tf.training import finetuning, pretraining

    settings = {"task": "classify", "word_embedding_dim": 8}
    for record in ({"settings": settings, "labels": ["neg", "pos"], "epochs": []},
                   {"settings": settings, "labels": ["neg", "pos"], "metric": "accuracy",
                    "epochs": [{"accuracy": 0.5, "loss": float("nan")}, {"accuracy": 1}],
                    "bilm_outputs_once": True, "speed": {"steps": 3}}):
        finetuning.check_record(json.loads(json.dumps(record)), "run.json", "accuracy", "out")
    pretraining.check_record({"settings": {"recipe": {}, "tokenizer": "whitespace"},
                              "corpus_size": {"sentences": 3, "tokens": 10 ** 400},
                              "trained_seconds": 10 ** 400, "steps": 10 ** 400}, "run.json")


def test_a_finetune_of_another_task_into_a_run_is_named_another_run(finetuned, tmp_path,
                                                                     capsys):
    """Another task's run (its metric differs too) is another run, not a damaged record."""
    out = tmp_path / "classifier"
    shutil.copytree(finetuned["classifier"], out)
    conll = tmp_path / "train.conll"
    conll.write_text("a DT\ngood JJ\nfilm NN\n\nbad JJ\n\n")
    message = _cli_error(capsys, "finetune", "--task", "tag", "--train", str(conll), "--dev",
                         str(conll), "--model", str(finetuned["bilm"]), "--output", str(out))
    assert f"{out} holds another run (run.json differs: " in message, message
    assert "put back what it wrote" not in message
    # Another recipe into a biLM's run: the recipes' names first (a label, not compared).
    train = finetuned["train"] + ["--corpus", finetuned["corpus"]]
    train[train.index("--recipe") + 1] = "tiny_masked"
    message = _cli_error(capsys, *train)
    recipe = finetuned["bilm"].parent / "recipe.json"
    assert f"{finetuned['bilm']} holds another run (recipe 'tiny ({recipe})' then, " \
        "'tiny_masked' now; run.json differs: " in message, message


@pytest.mark.parametrize("which", ["--train", "--dev"])
def test_finetune_names_the_file_and_line_that_is_not_utf8(finetuned, tmp_path, capsys, which):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"pos\tgood\nneg\tbad\npos\tna\xefve\n")
    command = finetuned["finetune"][:-2] + ["--output", str(tmp_path / "out")]
    command[command.index(which) + 1] = str(bad)
    message = _cli_error(capsys, *command)
    assert f"{bad}, line 3: not valid UTF-8" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_predict_prints_every_good_line_before_the_one_that_is_not_utf8(
        finetuned, tmp_path, capsys, monkeypatch, source):
    # The bad line is line 81; lines 2 and 4 have a tab (as a label<TAB>text file's lines have).
    data = (b"a good film\npos\tbad\n" * 2 + b"a good film\nbad\n" * 38
            + b"na\xefve\nnever read\n")
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    if source == "stdin":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(finetuned["classifier"]),
                  "-" if source == "stdin" else str(path)])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and "Traceback" not in captured.err
    name = "stdin" if source == "stdin" else str(path)
    assert f"{name}, line 81: not valid UTF-8" in captured.err
    assert captured.err.count("has a tab") == 1 and f"{name}, line 2 has a tab" in captured.err
    assert len(captured.out.splitlines()) == 80
    assert set(captured.out.split()) <= {"pos", "neg"}


@pytest.mark.parametrize("command", ["predict", "export"])
@pytest.mark.parametrize("damaged", ["task.weights.h5", "model.weights.h5"])
def test_a_truncated_weights_file_is_called_damaged(finetuned, tmp_path, capsys, command,
                                                    damaged):
    out = tmp_path / "classifier"
    shutil.copytree(finetuned["classifier"], out,
                    ignore=shutil.ignore_patterns("checkpoints", "logs", "run.*"))
    whole = (out / damaged).read_bytes()
    (out / damaged).write_bytes(whole[:len(whole) // 2])
    args = (["predict", "--model", str(out), finetuned["labelled"]] if command == "predict" else
            ["export", "--model", str(out), "--output", str(tmp_path / "serving")])
    message = _cli_error(capsys, *args)
    assert f"{out / damaged} is damaged or truncated" in message
    assert message.count("\n") == 1


def test_ctrl_c_says_what_was_kept_and_how_to_resume(finetuned, tmp_path, capsys, monkeypatch):
    from elmo_tf import training
    from elmo_tf.training import finetuning

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "train", interrupted)
    monkeypatch.setattr(finetuning, "finetune", interrupted)
    train = finetuned["train"] + ["--corpus", finetuned["corpus"]]
    for argv, kept in [
            (train, f"kept {finetuned['bilm'] / 'checkpoints' / 'ckpt-000000002.weights.h5'} "
                    "(step 2); the same command resumes the run from it."),
            (finetuned["finetune"], f"kept {finetuned['classifier'] / 'checkpoints'}"
                                    f"/epoch-001.weights.h5 (epoch 1); the same command"),
            (train[:train.index("--output") + 1] + [str(tmp_path / "new")]
             + train[train.index("--output") + 2:], "nothing was written")]:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 130
        assert f"interrupted; {kept}" in capsys.readouterr().err

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("this process has a SIGTERM handler of its own")

    def terminated(*args, **kwargs):  # `kill`, as a batch scheduler stops a job
        handler = signal.getsignal(signal.SIGTERM)
        assert getattr(handler, "__module__", None) == "elmo_tf.cli"  # (else it ends pytest)
        signal.raise_signal(signal.SIGTERM)
        time.sleep(30)  # the handler raises here
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(training, "train", terminated)
    with pytest.raises(SystemExit) as exit_info:
        cli.main_process(train)
    assert exit_info.value.code == 143
    assert f"terminated; kept {finetuned['bilm'] / 'checkpoints' / 'ckpt-000000002.weights.h5'}" \
        in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # as it was
