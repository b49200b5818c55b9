"""File helpers: nothing half-written is ever left where a result is expected, nothing of the
user's is ever removed, one process at a time in a run directory, and files read with errors
that name them (file and line)."""

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time

import h5py
import numpy as np

_HOST = (re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host")[:24]


# The mark of every temporary elmo-tf makes: `NAME.elmo-tf-HOST-PID-RANDOM.tmp`. Only names with
# it are ever cleaned up (`remove_stale_temporaries`), so a user's `notes.2024.tmp` is never
# taken for one.
_MARK = "elmo-tf"
_TEMPORARY = rf"\.{re.escape(_MARK)}-[A-Za-z0-9-]+-\d+-[A-Za-z0-9_]+\.tmp"


def temporary_prefix(name):
    """The prefix of this process's temporaries for `name`: `name.elmo-tf-HOST-PID-` (the writer
    is named, so that a person can tell whose they are; what makes one stale is its lock, see
    `remove_stale_temporaries`)."""
    return f"{name}.{_MARK}-{_HOST}-{os.getpid()}-"


def is_temporary(basename, name=None):
    """Whether `basename` is the name of an elmo-tf temporary (of `name`, or of any name)."""
    return re.fullmatch((re.escape(name) if name is not None else r".+") + _TEMPORARY,
                        basename) is not None


def in_a_temporary(path):
    """Whether `path` is inside one of elmo-tf's temporary directories (a staging or a
    process's scratch, `locked_temporary`): its writer holds the directory's lock, and moves
    what is in it into place, or removes it, whole."""
    return is_temporary(os.path.basename(os.path.dirname(os.path.abspath(path))))


def names_a_file(path):
    """Whether `path` is something other than a directory that exists (`out/` for a file
    named out included): where a command's output directory cannot be."""
    return os.path.exists(os.path.normpath(path)) and not os.path.isdir(path)


def with_umask(mode):
    """`mode` less this process's umask: the mode `open` or `mkdir` would give a new file or
    directory (`mkstemp` and `mkdtemp` give 0600 and 0700 instead)."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


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
    `NAME.elmo-tf-HOST-PID-RANDOM.tmp`, created and locked (`flock`) in one step as
    `remove_stale_temporaries` sees it, and locked until the block ends, however the process
    ends (kill -9 included). Yields its path; the block moves it into place. If the block
    raises, the temporary is removed.

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


@contextlib.contextmanager
def scratch_directory(directory, name):
    """A new temporary directory for `name` in `directory` (`locked_temporary`: one a killed
    process left is removed by the next `remove_stale_temporaries` there), removed when the
    block ends, however it ends.

    Example:
    >>> with scratch_directory("runs/sst2", "bilm_outputs") as scratch:
    ...     train_on_files_in(scratch)
    """
    with locked_temporary(directory, name, is_directory=True) as path:
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


def remove_stale_temporaries(directory, name=None):
    """Removes the temporaries a killed writer left in `directory`: for `name` (any name when
    None), the files and directories elmo-tf named `NAME.elmo-tf-HOST-PID-RANDOM.tmp`
    (`locked_temporary`) that no process holds locked, whatever their age. A live writer's
    temporaries, on this host or another one sharing the file system, are left alone, and so is
    everything else: a user's `notes.2024.tmp` or `results.old.tmp/` never matches.

    Example:
    >>> remove_stale_temporaries("runs/elmo/checkpoints")
    """
    if not os.path.isdir(directory):
        return
    with _directory_lock(directory, fcntl.LOCK_EX):
        for entry in os.listdir(directory):
            if not is_temporary(entry, name):
                continue
            path = os.path.join(directory, entry)
            try:
                if not _is_locked(path):
                    remove_path(path)
            except OSError:  # gone meanwhile, or another user's (not ours to remove)
                continue


def remove_path(path):
    """Removes the file, link or directory (with what it holds) at `path`."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.remove(path)


def _is_locked(path):
    fd = os.open(path, os.O_RDONLY)
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
    failed write is an `OSError` that names `path`. Inside one of elmo-tf's temporary
    directories (an enclosing `write_files_atomically`'s staging, a process's scratch: locked
    by its writer, who removes it, or moves it in, whole), `write(path)` writes `path` itself.

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
    staged = in_a_temporary(path)
    if not staged:  # (a staging directory's lock is its writer's: it would wait for itself)
        remove_stale_temporaries(directory, name)
    if needed_bytes is not None:
        check_free_space(path, needed_bytes, path)
    try:
        if staged:
            write(path)
            return
        with locked_temporary(directory, name) as tmp:
            write(tmp)
            os.chmod(tmp, with_umask(0o666))  # mkstemp makes 0600: a normal file's mode
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
        raise OSError(errno.ENOSPC, f"{what} needs about {readable_size(needed_bytes)} and "
                                    f"{directory} has {readable_size(free)} free; free some space "
                                    "or write elsewhere")


def variables_bytes(variables):
    """The bytes `variables` (Keras or TF variables, each counted once) take written out: the
    size to ask `check_free_space` for before saving them."""
    unique = {id(v): v for v in variables}.values()
    return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in unique)


def readable_size(size):
    """`size` bytes for people, in binary units: `"4,096 bytes"`, `"1.5 MiB"`, `"12.3 GiB"`.

    Example:
    >>> readable_size(3 * 2**29)
    '1.5 GiB'
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:,} bytes"


@contextlib.contextmanager
def hdf5_for_writing(path):
    """`h5py.File(path, "w")`, written through a Python file object: a write that fails (a full
    disk, a file-size limit) is then a plain `OSError`. HDF5's own file driver meets it with
    thousands of "Exception ignored" tracebacks and then a segfault."""
    with open(path, "wb+") as raw, h5py.File(raw, "w") as f:
        yield f


def write_files_atomically(directory, write, last=None, needed_bytes=None):
    """Calls `write(staging)` for a temporary directory in `directory` (`locked_temporary`:
    what a killed writer leaves there is removed by the next write), then renames each file
    it wrote into `directory` (same relative paths), each whole or not at all; `last` (a
    relative path, or several, in order) goes in after the others, and an earlier `last` is
    removed before any: a directory whose `last` marks it complete (a KerasHub preset's
    config.json; a task preset's task.json too) is never a mix
    of two writes. Other files in `directory` are kept. A `directory` that does not exist yet
    is staged beside it instead and renamed into place whole (`write_new_directory`): a
    process killed at any point leaves nothing there (one that another process makes meanwhile
    is taken over while it is empty, and kept, named in a FileExistsError, once it holds
    files). Errors name `directory`, not the temporary. With `needed_bytes`, the disk's room
    is checked first (`check_free_space`). Called for an enclosing call's staging directory (a
    task preset writes its backbone's files), it writes there directly: the enclosing call
    moves everything in.

    Example:
    >>> write_files_atomically("preset/", backbone_saver, last="config.json")
    """
    directory = os.fspath(directory)
    lasts = [last] if isinstance(last, str) else list(last or ())
    target = os.path.abspath(directory)  # ("out/" for a file named out: the file)
    if is_temporary(os.path.basename(target)) or (in_a_temporary(target)
                                                  and not os.path.lexists(target)):
        # Inside an enclosing write's staging (locked by that writer): it moves it all in, or
        # removes it all (what a caught error here leaves stays in that staging).
        os.makedirs(target, exist_ok=True)
        write(directory)
        return
    if not os.path.lexists(target):
        write_new_directory(directory, write, needed_bytes)
        return
    os.makedirs(directory, exist_ok=True)
    remove_stale_temporaries(directory, ".staging")
    if needed_bytes is not None:
        check_free_space(directory, needed_bytes, f"the files written into {directory}")
    with locked_temporary(directory, ".staging", is_directory=True) as staging, \
            _naming(staging, directory):
        write(staging)
        names = sorted((os.path.relpath(os.path.join(root, name), staging)
                        for root, _, files in os.walk(staging) for name in files),
                       key=lambda name: lasts.index(name) + 1 if name in lasts else 0)
        for last in reversed(lasts):  # the outermost mark first
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(directory, last))
        for root, _, _ in os.walk(staging):
            os.makedirs(os.path.join(directory, os.path.relpath(root, staging)), exist_ok=True)
        for name in names:
            os.replace(os.path.join(staging, name), os.path.join(directory, name))
        remove_path(staging)


def write_new_directory(directory, write, needed_bytes=None):
    """`write_files_atomically` of a `directory` that must be new: `write(staging)` for a
    temporary directory beside it, then one rename, so that a process killed at any point
    leaves nothing there. A `directory` that exists (or that another process makes with files
    in it meanwhile: kept, nothing of this write moved in) is a FileExistsError naming it.

    Example:
    >>> write_new_directory("serving/elmo/2", lambda d: tf.saved_model.save(module, d))
    """
    directory = os.fspath(directory)
    target = os.path.abspath(directory)
    parent, name = os.path.split(target)
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, f"{directory} exists; write elsewhere")
    os.makedirs(parent, exist_ok=True)
    remove_stale_temporaries(parent, name)
    if needed_bytes is not None:
        check_free_space(parent, needed_bytes, f"the files written into {directory}")
    with locked_temporary(parent, name, is_directory=True) as staging, \
            _naming(staging, directory):
        write(staging)
        # mkdtemp makes 0700: a normal directory's mode (and the set-group-ID bit it
        # inherited in a shared directory)
        os.chmod(staging, (os.stat(staging).st_mode & 0o7000) | with_umask(0o777))
        try:
            os.replace(staging, target)
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
            raise FileExistsError(
                errno.EEXIST, f"{directory} appeared while it was written (another "
                "process?): nothing of this write was moved in; write again, or "
                "elsewhere") from None


@contextlib.contextmanager
def _naming(staging, directory):
    """An `OSError` raised in the block names `directory` where it named `staging` (a
    failed write names where its files were going, not the temporary they were written in)."""
    try:
        yield
    except OSError as error:
        message = str(error)
        if staging not in message or type(error) is not type(OSError(error.errno, "")):
            raise  # (not a system call's error: `shutil.Error`, say)
        message = re.sub(r"^\[Errno \d+\] ", "", message).replace(staging,
                                                                  directory.rstrip(os.sep))
        raise (OSError(message) if error.errno is None else OSError(error.errno, message)) \
            from error


def write_json_atomically(path, value):
    """Writes `value` as indented JSON to `path`, atomically (`write_atomically`)."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)

    write_atomically(path, write)


def read_json(path):
    """The JSON value in `path`; a file that is not JSON (not text at all, e.g. an HDF5 file
    given for an options.json) is a ValueError that names it, a path that is no file a
    FileNotFoundError or IsADirectoryError that names it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{path} is a directory, not a JSON file") from None
    if data.startswith(b"\x89HDF"):
        raise ValueError(f"{path}: an HDF5 file, not JSON (weights given where a JSON file "
                         "belongs? e.g. --options and --weights swapped).")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a JSON text file (not valid UTF-8 at byte "
                         f"{error.start}).") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error}).") from None


def utf8_lines(path):
    """The lines of a UTF-8 text file (`"-"`: standard input), each without its line break
    (LF, CRLF or a lone CR, as Python's text mode splits lines), one at a time: a line that is
    not UTF-8 is a ValueError naming the file (or stdin) and the line, raised when that line
    is reached (the lines before it have been yielded). The path is checked at the call: one
    that is no file is an OSError naming it, before any other work (the file is opened at the
    first line).

    Example:
    >>> for line in utf8_lines("sentences.txt"):
    ...     print(line.split())
    """
    if path == "-":
        return _utf8_lines(path, "stdin")
    name = os.fspath(path)
    if os.path.isdir(name):
        raise IsADirectoryError(f"{name} is a directory; give a text file")
    if not os.path.exists(name):
        raise FileNotFoundError(f"{name}: no such file")
    return _utf8_lines(path, name)


def _utf8_lines(path, name):
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    number = 0
    try:
        for chunk in stream:
            # Python's universal newlines, as text mode reads: "\n", "\r\n" and a lone "\r".
            chunk = chunk[:-2] if chunk.endswith(b"\r\n") else chunk.rstrip(b"\n")
            if chunk.endswith(b"\r"):  # the last line of a file of lone CRs
                chunk = chunk[:-1]
            for line in chunk.split(b"\r"):
                number += 1
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(f"{name}, line {number}: not valid UTF-8 ({error.reason} "
                                     f"at byte {error.start}); the file must be UTF-8 text."
                                     ) from None
    finally:
        if path != "-":
            stream.close()


class InUseError(OSError):
    """A directory (a run's) is held by another process (`exclusive_lock`)."""


@contextlib.contextmanager
def exclusive_lock(path, what):
    """Holds the lock file `path` (made if absent) exclusively for the block, for this process
    alone: another process (or another block of this one) asking for it meanwhile gets an
    `InUseError` naming `what` and the holder (its process id, host, command and start time).
    The lock is `flock`'s: it ends with the block, and with the process however it ends
    (kill -9 included); the block's end also removes the file.

    Example:
    >>> with exclusive_lock("runs/elmo/run.lock", "runs/elmo"):
    ...     train()
    """
    path = os.fspath(path)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise InUseError(f"{what} is in use by another elmo-tf process "
                             f"({holder or 'starting'}); wait until it ends, or use another "
                             "directory.") from None
        try:  # the file a holder removed as it ended (then locked here): take the new one
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        command = " ".join(os.path.basename(a) if i == 0 else a
                           for i, a in enumerate(sys.argv))[:300]
        os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()}, since "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {command}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # while still held: a process waiting on it takes a new file
        os.close(fd)


@contextlib.contextmanager
def private_temporary_directory():
    """Points this process's temporary files (Python's `tempfile`, and `TMPDIR` for TensorFlow's
    own) into a directory of its own in the system's (`elmo-tf-scratch-UID.elmo-tf-*.tmp`),
    removed when the block ends. TensorFlow leaves its AutoGraph files
    (`__autograph_generated_file*.py`) in the temporary directory when a process is killed
    (kill -9): in a locked directory of elmo-tf's, the same user's next command removes them
    (`remove_stale_temporaries`). For a process's main function.

    Example:
    >>> with private_temporary_directory():
    ...     sys.exit(main())
    """
    system = tempfile.gettempdir()
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    name = f"elmo-tf-scratch-{os.getuid()}"  # a user's own: others' are not theirs to clean
    remove_stale_temporaries(system, name)
    with locked_temporary(system, name, is_directory=True) as scratch:
        tempfile.tempdir = os.environ["TMPDIR"] = scratch
        try:
            yield scratch
        finally:
            tempfile.tempdir = saved[0]
            if saved[1] is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = saved[1]
            shutil.rmtree(scratch, ignore_errors=True)
