import os
import shutil
import stat
import subprocess
import sys

import pytest

from elmo_tf.files import check_free_space, temporary_prefix, write_atomically


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


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_next_write_removes_what_a_killed_writer_left_and_nothing_else(tmp_path):
    """kill -9 leaves a temporary (and Keras's staged file beside it); the next write of the
    same file on this host removes those of dead processes, keeps a live writer's, another
    host's and other files'."""
    target = tmp_path / "vec.hdf5"
    dead = temporary_prefix("vec.hdf5").replace(f"-{os.getpid()}.", f"-{_dead_pid()}.")
    leftovers = [dead + "abc123.tmp", dead + "abc123.tmp.weights.h5"]
    kept = [temporary_prefix("vec.hdf5") + "live.tmp",      # this (running) process's
            "vec.hdf5.otherhost-1.x.tmp",                   # another host's
            "other.hdf5." + dead.split(".", 2)[2] + "z.tmp"]  # another file's
    for name in leftovers + kept:
        (tmp_path / name).write_text("half")
    write_atomically(target, lambda tmp: open(tmp, "w").write("done"))
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["vec.hdf5"])


def test_free_space_is_that_of_the_nearest_existing_directory(tmp_path, monkeypatch):
    asked = []
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda path: asked.append(path) or usage._replace(free=1000))
    check_free_space(tmp_path / "new" / "deeper" / "file.h5", 1000, "file.h5")
    assert asked == [str(tmp_path)]
    with pytest.raises(OSError, match=r"file.h5 needs about 0.0 MB and .* has 0.0 MB free"):
        check_free_space(tmp_path / "file.h5", 1001, "file.h5")
