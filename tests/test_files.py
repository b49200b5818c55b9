import fcntl
import os
import shutil
import stat
import time

import pytest

from elmo_tf.files import check_free_space, held, temporary_prefix, write_atomically


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


def _old(path):
    """`path` as a killed writer leaves it: a minute old."""
    past = time.time() - 60
    os.utime(path, (past, past))


def test_the_next_write_removes_what_a_killed_writer_left_and_nothing_else(tmp_path):
    """kill -9 leaves a temporary (and Keras's staged file beside it); the next write of the
    same file removes those no process holds locked, and keeps a live writer's (locked, on this
    host or another), a just-made one, and other files'."""
    target = tmp_path / "vec.hdf5"
    prefix = temporary_prefix("vec.hdf5")
    leftovers = [prefix + "abc123.tmp", prefix + "abc123.tmp.weights.h5",
                 "vec.hdf5.otherhost-7.def456.tmp", "vec.hdf5.kz81m2xq.tmp"]  # 0.1's naming
    live, fresh = prefix + "live0001.tmp", prefix + "fresh001.tmp"
    kept = [live, fresh, "vec.hdf5.notes", "other.hdf5." + prefix.split(".", 2)[2] + "z.tmp"]
    for name in leftovers + kept:
        (tmp_path / name).write_text("half")
        if name != fresh:
            _old(tmp_path / name)
    with held(tmp_path / live):  # as a writer in another process holds it
        write_atomically(target, lambda tmp: open(tmp, "w").write("done"))
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["vec.hdf5"])
    assert target.read_text() == "done"


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
