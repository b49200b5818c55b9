"""File helpers: nothing half-written is ever left where a result is expected, and JSON files
read with errors that name them."""

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import socket
import tempfile

import h5py
import numpy as np

_HOST = (re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host")[:24]


def temporary_prefix(name):
    """The prefix of this process's temporaries for `name`: `name.HOST-PID.` (so that a person
    can tell whose they are; what makes one stale is its lock, see `remove_stale_temporaries`)."""
    return f"{name}.{_HOST}-{os.getpid()}."


@contextlib.contextmanager
def _directory_lock(directory, operation):
    """Holds `flock(operation)` on `directory` itself. Writers hold it shared while they create
    and lock a temporary there, cleaners exclusively while they look for stale ones: a cleaner
    never sees a live writer's temporary before its lock."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, operation)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked_temporary(directory, name, is_directory=False):
    """A new temporary file (or directory) for `name` in `directory`, named
    `NAME.HOST-PID.*.tmp`, created and locked (`flock`) in one step as `remove_stale_temporaries`
    sees it, and locked until the block ends, however the process ends (kill -9 included).
    Yields its path; the block moves it into place. If the block raises, the temporary is
    removed.

    Example:
    >>> with locked_temporary("out", "vec.hdf5") as tmp:
    ...     write(tmp)
    ...     os.replace(tmp, "out/vec.hdf5")
    """
    with _directory_lock(directory, fcntl.LOCK_SH):
        if is_directory:
            tmp = tempfile.mkdtemp(dir=directory, prefix=temporary_prefix(name), suffix=".tmp")
            fd = os.open(tmp, os.O_RDONLY)
        else:
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=temporary_prefix(name),
                                       suffix=".tmp")
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield tmp
    except BaseException:
        if is_directory:
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.remove(tmp)
        raise
    finally:
        os.close(fd)


def remove_stale_temporaries(directory, name=None):
    """Removes the temporaries a killed writer left in `directory`: for `name` (any name when
    None), files and directories named `NAME.*.tmp` (and Keras's staged `NAME.*.tmp.weights.h5`)
    that no process holds locked, whatever their age. A live writer's temporaries
    (`locked_temporary`), on this host or another one sharing the file system, are left alone."""
    if not os.path.isdir(directory):
        return
    pattern = (re.escape(name) if name is not None else r".+") + r"\..+\.tmp(\.weights\.h5)?"
    with _directory_lock(directory, fcntl.LOCK_EX):
        for path in glob.glob(os.path.join(glob.escape(directory),
                                           (glob.escape(name) if name is not None else "") + "*")):
            match = re.fullmatch(pattern, os.path.basename(path))
            if not match:
                continue
            lock = path[:-len(match.group(1))] if match.group(1) else path  # staged: its .tmp's
            with contextlib.suppress(FileNotFoundError):
                if _is_locked(lock):
                    continue
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)


def _is_locked(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False  # a staged file whose temporary is gone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def write_atomically(path, write, needed_bytes=None):
    """Calls `write(tmp_path)` for a temporary file beside `path`, then renames it into place.

    If `write` raises (or the process is interrupted), `path` is untouched and the temporary
    file is removed. A process killed outright (kill -9, power loss) cannot remove it: the next
    write of `path` does (`remove_stale_temporaries`; the temporary is locked while written). A
    failed write is an `OSError` that names `path`.

    Args:
        path: the file to write.
        write: `write(tmp_path)` writes the whole file.
        needed_bytes: if given, the space the file needs: `check_free_space` first (after the
            leftovers of killed writers are gone).

    Example:
    >>> write_atomically("out.txt", lambda tmp: open(tmp, "w").write("done"))
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    name = os.path.basename(path)
    remove_stale_temporaries(directory, name)
    if needed_bytes is not None:
        check_free_space(path, needed_bytes, path)
    umask = os.umask(0)
    os.umask(umask)
    try:
        with locked_temporary(directory, name) as tmp:
            write(tmp)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give it a normal file's mode
            os.replace(tmp, path)
    except OSError as error:
        if error.filename is None and path not in str(error):
            # "[Errno 28] No space left on device" alone does not say what was being written.
            message = f"writing {path} failed: {error.strerror or error}"
            raise (OSError(error.errno, message) if error.errno else OSError(message)) \
                from error
        raise


def check_free_space(path, needed_bytes, what):
    """Raises `OSError` (ENOSPC) naming `what`, the sizes and the place when the file system of
    `path` (a file to write or a directory) has less than `needed_bytes` free."""
    directory = os.path.abspath(os.fspath(path))
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    while not os.path.isdir(directory):  # a directory the write will create
        directory = os.path.dirname(directory)
    free = shutil.disk_usage(directory).free
    if needed_bytes > free:
        raise OSError(errno.ENOSPC, f"{what} needs about {_megabytes(needed_bytes)} and "
                                    f"{directory} has {_megabytes(free)} free; free some space "
                                    "or write elsewhere")


def variables_bytes(variables):
    """The bytes `variables` (Keras or TF variables, each counted once) take written out: the
    size to ask `check_free_space` for before saving them."""
    unique = {id(v): v for v in variables}.values()
    return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in unique)


def _megabytes(size):
    return f"{size / 2**20:,.1f} MB" if size >= 2**20 else f"{size:,} bytes"


@contextlib.contextmanager
def hdf5_for_writing(path):
    """`h5py.File(path, "w")`, written through a Python file object: a write that fails (a full
    disk, a file-size limit) is then a plain `OSError`. HDF5's own file driver meets it with
    thousands of "Exception ignored" tracebacks and then a segfault."""
    with open(path, "wb+") as raw, h5py.File(raw, "w") as f:
        yield f


def write_json_atomically(path, value):
    """Writes `value` as indented JSON to `path`, atomically (`write_atomically`)."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)

    write_atomically(path, write)


def read_json(path):
    """The JSON value in `path`; a file that is not JSON is a ValueError that names it."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error}).") from None
