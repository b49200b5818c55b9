"""File helpers: nothing half-written is ever left where a result is expected, and JSON files
read with errors that name them."""

import contextlib
import errno
import glob
import json
import os
import re
import shutil
import socket
import tempfile

import h5py

_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def temporary_prefix(name):
    """The prefix of this process's temporaries for `name`: `name.HOST-PID.` (its owner, so that
    a later run can tell a killed writer's leftovers from a live writer's work)."""
    return f"{name}.{_HOST}-{os.getpid()}."


def remove_stale_temporaries(directory, name):
    """Removes what a killed writer left for `name` in `directory`: the temporaries
    `name.HOST-PID.*` of this host whose process no longer runs. Temporaries of a running
    process or of another host (a shared file system) are left alone."""
    for path in glob.glob(os.path.join(glob.escape(directory), glob.escape(name) + ".*")):
        match = re.fullmatch(re.escape(name) + r"\.(.+)-(\d+)\..+", os.path.basename(path))
        if not match or match.group(1) != _HOST or _running(int(match.group(2))):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_atomically(path, write):
    """Calls `write(tmp_path)` for a temporary file beside `path`, then renames it into place.

    If `write` raises (or the process is interrupted), `path` is untouched and the temporary
    file is removed. A process killed outright (kill -9, power loss) cannot remove it: the next
    write of `path` on the same host does (`remove_stale_temporaries`).

    Example:
    >>> write_atomically("out.txt", lambda tmp: open(tmp, "w").write("done"))
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    name = os.path.basename(path)
    remove_stale_temporaries(directory, name)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=temporary_prefix(name), suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException as error:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(error, OSError) and error.filename is None and path not in str(error):
            # "[Errno 28] No space left on device" alone does not say what was being written.
            raise OSError(error.errno, f"writing {path} failed: {error.strerror or error}") \
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


def _megabytes(size):
    return f"{size / 2**20:,.1f} MB"


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
