import contextlib
import fcntl
import os
import pathlib
import re
import shutil
import stat
import tempfile
import threading

import pytest

from elmo_tf.files import (
    check_free_space,
    private_temporary_directory,
    read_json,
    remove_stale_temporaries,
    temporary_prefix,
    utf8_lines,
    write_atomically,
    write_files_atomically,
    write_new_directory,
)


def test_writes_with_the_usual_file_mode_and_replaces_atomically(tmp_path):
    target = tmp_path / "out.txt"
    umask = os.umask(0o022)
    try:
        write_atomically(target, lambda tmp: open(tmp, "w").write("new"))
    finally:
        os.umask(umask)
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def fail(tmp):
        open(tmp, "w").write("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_atomically(target, fail)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_a_new_directory_appears_whole_in_one_rename_or_not_at_all(tmp_path, monkeypatch):
    """A directory that does not exist yet is staged beside it (the files inside written by
    `write_atomically` and nested `write_files_atomically` calls directly, not waiting on the
    staging's own lock) and renamed into place with a normal directory's mode; a write that
    fails leaves nothing there, and no temporary."""
    def write(staging):
        write_atomically(os.path.join(staging, "weights.hdf5"),
                         lambda tmp: open(tmp, "w").write("w"))
        write_files_atomically(staging, lambda inner: open(os.path.join(inner, "config.json"),
                                                           "w").write("{}"), last="config.json")
        write_files_atomically(os.path.join(staging, "assets"), lambda inner: open(
            os.path.join(inner, "vocab.txt"), "w").write("a"))  # a new directory in it

    renames = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: renames.append((a, b)) or replace(a, b))
    umask = os.umask(0o022)
    try:  # (in a thread: a nested write waiting on the staging's lock would wait forever)
        writer = threading.Thread(target=write_files_atomically, daemon=True, args=(
            tmp_path / "new" / "model", write), kwargs={"last": "config.json"})
        writer.start()
        writer.join(60)
    finally:
        os.umask(umask)
    assert not writer.is_alive(), "a write inside the staging waits on the staging's lock"
    model = tmp_path / "new" / "model"
    assert sorted(os.listdir(model)) == ["assets", "config.json", "weights.hdf5"]
    assert os.listdir(model / "assets") == ["vocab.txt"]
    assert stat.S_IMODE(model.stat().st_mode) & 0o777 == 0o755
    assert [os.fspath(b) for _, b in renames] == [os.fspath(model)]  # one rename, the whole
    assert os.listdir(tmp_path / "new") == ["model"]
    # In a directory shared by a group (set-group-ID), a new directory keeps the bit, as
    # `mkdir` would.
    (tmp_path / "shared").mkdir()
    os.chmod(tmp_path / "shared", 0o2775)
    write_files_atomically(tmp_path / "shared" / "model", write, last="config.json")
    assert (tmp_path / "shared" / "model").stat().st_mode & stat.S_ISGID

    def fail(staging):
        write(staging)
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        write_files_atomically(tmp_path / "failed", fail, last="config.json")
    assert sorted(os.listdir(tmp_path)) == ["new", "shared"]


def test_a_failed_directory_write_names_the_directory_and_one_made_meanwhile_is_kept(
        tmp_path):
    """An error in a staged write names where the files were going, not the temporary; a
    directory that another process made while this one wrote is kept as it is, and named."""
    def full_disk(staging):
        raise OSError(28, f"writing {os.path.join(staging, 'weights.hdf5')} failed: "
                          "No space left on device")

    for directory in (tmp_path / "new", tmp_path / "existing"):
        if directory.name == "existing":
            directory.mkdir()
        with pytest.raises(OSError) as error:
            write_files_atomically(directory, full_disk)
        assert error.value.errno == 28 and str(error.value) == (
            f"[Errno 28] writing {directory / 'weights.hdf5'} failed: No space left on device")
    assert sorted(os.listdir(tmp_path)) == ["existing"] and not os.listdir(tmp_path / "existing")

    def another_process_meanwhile(staging):
        (tmp_path / "taken").mkdir()
        (tmp_path / "taken" / "theirs.txt").write_text("theirs")
        (pathlib.Path(staging) / "ours.txt").write_text("ours")

    with pytest.raises(FileExistsError, match=re.escape(
            f"{tmp_path / 'taken'} appeared while it was written")):
        write_files_atomically(tmp_path / "taken", another_process_meanwhile)
    assert os.listdir(tmp_path / "taken") == ["theirs.txt"]
    assert sorted(os.listdir(tmp_path)) == ["existing", "taken"]

    def failed_library_call(staging):  # TensorFlow's errors, turned into OSError, have no errno
        raise OSError(f"writing the SavedModel failed: {staging}/variables: quota exceeded")

    with pytest.raises(OSError) as error:
        write_files_atomically(tmp_path / "version", failed_library_call)
    assert str(error.value) == (
        f"writing the SavedModel failed: {tmp_path / 'version'}/variables: quota exceeded")
    assert sorted(os.listdir(tmp_path)) == ["existing", "taken"]


def test_a_new_directory_is_never_written_into_one_that_exists(tmp_path):
    """`write_new_directory` (a SavedModel's version): a directory that exists, even empty, is
    refused by name and left as it was; one that another process filled meanwhile is kept."""
    (tmp_path / "1").mkdir()
    with pytest.raises(FileExistsError, match=re.escape(f"{tmp_path / '1'} exists")):
        write_new_directory(tmp_path / "1", lambda d: (pathlib.Path(d) / "x").write_text("x"))
    assert os.listdir(tmp_path) == ["1"] and os.listdir(tmp_path / "1") == []

    def another_export_meanwhile(staging):
        (tmp_path / "2").mkdir()
        (tmp_path / "2" / "saved_model.pb").write_text("theirs")
        (pathlib.Path(staging) / "saved_model.pb").write_text("ours")

    with pytest.raises(FileExistsError, match="appeared while it was written"):
        write_new_directory(tmp_path / "2", another_export_meanwhile)
    assert (tmp_path / "2" / "saved_model.pb").read_text() == "theirs"
    assert sorted(os.listdir(tmp_path)) == ["1", "2"]
    write_new_directory(tmp_path / "3", lambda d: (pathlib.Path(d) / "x").write_text("x"))
    assert sorted(os.listdir(tmp_path / "3")) == ["x"]


@contextlib.contextmanager
def _held(path):
    """An exclusive flock on `path`, as a live writer in another process holds its
    temporary."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_the_next_write_removes_what_a_killed_writer_left_and_nothing_else(tmp_path):
    """kill -9 leaves a temporary; the next write of the same file removes those no process
    holds locked, whatever their age (one made a moment ago included), and keeps a live
    writer's (locked, on this host or another), other files' and the user's own."""
    target = tmp_path / "vec.hdf5"
    prefix = temporary_prefix("vec.hdf5")
    leftovers = [prefix + "abc123.tmp", "vec.hdf5.elmo-tf-otherhost-7-def456.tmp",
                 prefix + "justnow1.tmp"]
    live = prefix + "live0001.tmp"
    kept = [live, "vec.hdf5.notes", "vec.hdf5.2024.tmp", "vec.hdf5.kz81m2xq.tmp",
            "other.hdf5." + prefix.split(".", 2)[2] + "z.tmp"]
    for name in leftovers + kept:
        (tmp_path / name).write_text("half")
    with _held(tmp_path / live):
        write_atomically(target, lambda tmp: open(tmp, "w").write("done"))
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["vec.hdf5"])
    assert target.read_text() == "done"


def test_the_users_own_tmp_files_and_folders_are_never_taken_for_temporaries(tmp_path):
    """Names a user gives (the issue's: `my.notes.tmp`, `backup.2024.tmp`, a folder
    `results.old.tmp/` with a file inside) survive a cleaning of the whole directory, which
    removes elmo-tf's own unlocked temporaries, files and directories."""
    users = ["my.notes.tmp", "backup.2024.tmp", "results.old.tmp/data.csv",
             "x.host-1.abc.tmp"]  # the last: elmo-tf 0.2's naming, indistinguishable from a user's
    for name in users:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("mine")
    ours = [temporary_prefix("vec.hdf5") + "k1.tmp", temporary_prefix(".export") + "k2.tmp"]
    (tmp_path / ours[0]).write_text("half")
    (tmp_path / ours[1] / "variables").mkdir(parents=True)
    remove_stale_temporaries(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(["my.notes.tmp", "backup.2024.tmp",
                                                   "results.old.tmp", "x.host-1.abc.tmp"])
    assert all((tmp_path / name).read_text() == "mine" for name in users)


def test_a_cleaner_never_sees_a_temporary_before_its_lock(tmp_path, monkeypatch):
    """Creating a temporary and locking it are one step as a cleaner sees them: a cleaner that
    runs in between (another process writing the same file) waits, then keeps the temporary,
    locked by then. Without that, it would take the new temporary for a dead writer's."""
    cleaners = []
    make = tempfile.mkstemp

    def mkstemp_then_a_cleaner(*args, **kwargs):
        fd, path = make(*args, **kwargs)
        cleaner = threading.Thread(target=remove_stale_temporaries, args=(str(tmp_path),))
        cleaner.start()
        cleaner.join(0.5)
        cleaners.append(cleaner.is_alive())  # waiting for the writer to lock its temporary
        assert os.path.exists(path)
        return fd, path

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_a_cleaner)
    write_atomically(tmp_path / "out.txt", lambda tmp: open(tmp, "w").write("done"))
    assert cleaners == [True]
    assert (tmp_path / "out.txt").read_text() == "done"


def test_a_temporary_is_locked_while_it_is_written(tmp_path):
    seen = []

    def write(tmp):
        fd = os.open(tmp, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        seen.append(tmp)
        open(tmp, "w").write("done")

    write_atomically(tmp_path / "out.txt", write)
    assert seen and not os.path.exists(seen[0])


def test_free_space_is_that_of_the_nearest_existing_directory(tmp_path, monkeypatch):
    asked = []
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: asked.append(path) or usage._replace(free=1000))
    check_free_space(tmp_path / "new" / "deeper" / "file.h5", 1000, "file.h5")
    assert asked == [str(tmp_path)]
    with pytest.raises(OSError, match=r"file.h5 needs about 1,001 bytes and .* has 1,000 bytes free"):
        check_free_space(tmp_path / "file.h5", 1001, "file.h5")


def test_text_lines_end_as_pythons_text_mode_ends_them_and_bad_bytes_are_named(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a b\r\nc\nd\re\n\nf\r")
    assert list(utf8_lines(path)) == ["a b", "c", "d", "e", "", "f"]
    assert list(utf8_lines(path)) == path.read_text().splitlines()
    path.write_bytes(b"good\nna\xefve\nnever\n")
    lines = utf8_lines(path)
    assert next(lines) == "good"  # the lines before the bad one come first
    with pytest.raises(ValueError, match=f"{path}, line 2: not valid UTF-8"):
        next(lines)
    # A path that is no file: refused at the call (before a command loads its model), by name.
    with pytest.raises(FileNotFoundError, match=rf"^{re.escape(str(tmp_path / 'nope.txt'))}: "
                                                "no such file$"):
        utf8_lines(tmp_path / "nope.txt")
    with pytest.raises(IsADirectoryError, match=rf"^{re.escape(str(tmp_path))} is a directory"):
        utf8_lines(tmp_path)


def test_another_users_scratch_directory_is_left_alone(tmp_path, monkeypatch):
    """A command cleans its user's scratch directories left by killed commands; another
    user's (0700, not openable) and a live one stay, and nothing fails."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = tmp_path / f"{temporary_prefix(f'elmo-tf-scratch-{os.getuid()}')}k1.tmp"
    theirs = tmp_path / f"{temporary_prefix('elmo-tf-scratch-4242')}k2.tmp"
    for directory in (mine, theirs):
        (directory / "__autograph_generated_file1.py").parent.mkdir()
        (directory / "__autograph_generated_file1.py").write_text("x = 1")
    real_open = os.open

    def no_permission(path, *args, **kwargs):
        if os.fspath(path) == str(theirs):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_permission)
    with private_temporary_directory() as scratch:
        assert tempfile.gettempdir() == scratch == os.environ["TMPDIR"]
        assert not mine.exists() and theirs.exists()
    assert not os.path.exists(scratch) and tempfile.tempdir == str(tmp_path)


def test_read_json_names_the_path_and_what_it_is_instead(tmp_path):
    """Each way a path is not a JSON file is an error naming it: absent, a directory, an
    HDF5 file (weights where options belong), bytes that are not UTF-8, text that is not JSON."""
    (tmp_path / "options.json").write_text('{"lstm": {"dim": 4}}')
    assert read_json(tmp_path / "options.json") == {"lstm": {"dim": 4}}
    cases = {"absent.json": (FileNotFoundError, "absent.json: no such file"),
             "folder": (IsADirectoryError, "folder is a directory, not a JSON file"),
             "weights.hdf5": (ValueError, "weights.hdf5: an HDF5 file, not JSON"),
             "latin1.json": (ValueError, "latin1.json: not a JSON text file"),
             "broken.json": (ValueError, "broken.json: not valid JSON")}
    (tmp_path / "folder").mkdir()
    (tmp_path / "weights.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(8))
    (tmp_path / "latin1.json").write_bytes('{"name": "caf\xe9"}'.encode("latin-1"))
    (tmp_path / "broken.json").write_text('{"lstm": ')
    for name, (error, message) in cases.items():
        with pytest.raises(error, match=re.escape(str(tmp_path / message))):
            read_json(tmp_path / name)
