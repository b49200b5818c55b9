"""File helpers: nothing half-written is ever left where a result is expected, and JSON files
read with errors that name them."""

import json
import os
import tempfile


def write_atomically(path, write):
    """Calls `write(tmp_path)` for a temporary file beside `path`, then renames it into place.

    If `write` raises (or the process is interrupted), `path` is untouched and the temporary
    file is removed.

    Example:
    >>> write_atomically("out.txt", lambda tmp: open(tmp, "w").write("done"))
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


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
