import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import threading

import pytest

from elmo_tf.files import (
    check_free_space,
    remove_stale_temporaries,
    temporary_prefix,
    write_atomically,
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
