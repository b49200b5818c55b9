"""TensorFlow's persistent XLA compilation cache, on by default: a resumed run, an evaluation
and a second `embed` of the same shapes on a GPU load what an earlier process compiled instead
of compiling it again (`docs/benchmarks.md`, "XLA on a CPU, and the XLA cache").

The cache is a directory per machine (`ELMO_TF_XLA_CACHE`, by default
`~/.cache/elmo_tf/xla`, then one sub-directory per CPU model and feature set, GPU models and
TensorFlow version: a program compiled for one CPU may use instructions another lacks).
`ELMO_TF_XLA_CACHE=off` turns it off. It is set in the `TF_XLA_FLAGS` environment variable when
elmo_tf is imported, which TensorFlow reads when it first compiles with XLA: import elmo_tf
before running TensorFlow code, or set `TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR`
yourself (a directory already given there is left alone).

This module does not import TensorFlow.

Example:
>>> import elmo_tf          # the cache is on
>>> elmo_tf.xla_cache.directory()
'/home/me/.cache/elmo_tf/xla/5f1c0e2a9b7d'
"""

import glob
import hashlib
import importlib.metadata
import os
import platform

ENVIRONMENT = "ELMO_TF_XLA_CACHE"
FLAG = "--tf_xla_persistent_cache_directory"


def directory(environ=None):
    """The cache directory for this machine, or None when `ELMO_TF_XLA_CACHE=off`."""
    environ = os.environ if environ is None else environ
    base = environ.get(ENVIRONMENT, "")
    if base.lower() == "off":
        return None
    if not base:
        cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(cache, "elmo_tf", "xla")
    return os.path.join(base, machine_key())


def configure(environ=None):
    """Adds the cache directory to `TF_XLA_FLAGS` in `environ` (the process's environment by
    default), unless the cache is off or a directory is already given there; returns the
    directory in use (None when off)."""
    environ = os.environ if environ is None else environ
    flags = environ.get("TF_XLA_FLAGS", "")
    given = [f.split("=", 1)[1] for f in flags.split() if f.startswith(FLAG + "=")]
    if given:
        return given[-1]
    path = directory(environ)
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None  # a read-only home: no cache, nothing else changes
    environ["TF_XLA_FLAGS"] = f"{flags} {FLAG}={path}".strip()
    return path


def child_environment(base, environ=None):
    """A copy of `environ` (the process's environment by default) for a child process that
    should use the cache under `base` (its `ELMO_TF_XLA_CACHE`: a directory, or "off"): this
    process's own cache directory, which importing elmo_tf put in `TF_XLA_FLAGS` and which a
    child would keep, is left out of it (other XLA flags stay).

    Example:
    >>> subprocess.run(command, env=elmo_tf.xla_cache.child_environment("/tmp/cold-cache"))
    """
    env = dict(os.environ if environ is None else environ, **{ENVIRONMENT: base})
    flags = [f for f in env.pop("TF_XLA_FLAGS", "").split() if not f.startswith(FLAG + "=")]
    if flags:
        env["TF_XLA_FLAGS"] = " ".join(flags)
    return env


def machine_key():
    """12 hex digits naming this machine's CPU model and features, GPU models and TensorFlow
    version."""
    parts = [platform.machine(), _tensorflow_version()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        parts += sorted({line for line in lines
                         if line.startswith(("model name", "flags", "Features", "CPU part"))})
    except OSError:
        parts.append(platform.processor())
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        with open(info, encoding="utf-8", errors="replace") as f:
            parts += [line for line in f.read().splitlines() if line.startswith("Model")]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _tensorflow_version():
    for distribution in ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu"):
        try:
            return f"{distribution} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            pass
    return "unknown"
