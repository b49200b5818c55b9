"""Checkpoints of a training run: written atomically every interval, the newest restored on
resume (under multi-worker: the newest that every worker has), a killed save's leftovers
removed."""

import contextlib
import glob
import logging
import math
import os
import re
import shutil

import h5py
import keras
import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.files import (
    check_free_space,
    hdf5_for_writing,
    locked_temporary,
    remove_stale_temporaries,
    variables_bytes,
    write_atomically,
)
from elmo_tf.keras_compat import save_weights_to_h5
from elmo_tf.training.distribution import is_multi_worker

logger = logging.getLogger("elmo_tf")


class CheckpointFiles:
    """The checkpoints of a run in `directory`: `PREFIX-NUMBER.weights.h5` (the model and its
    optimizer, Keras's `save_weights` layout), written atomically, the newest `keep` kept.
    Pre-training numbers them by step (`ckpt-000000120.weights.h5`), fine-tuning by epoch
    (`epoch-003.weights.h5`).

    Example:
    >>> files = CheckpointFiles("runs/tiny/checkpoints")
    >>> files.save(model, step, keep=2)
    >>> files.newest()
    (120, 'runs/tiny/checkpoints/ckpt-000000120.weights.h5')
    """

    def __init__(self, directory, prefix="ckpt", digits=9):
        self.directory, self.prefix, self.digits = os.fspath(directory), prefix, digits
        self._name = re.compile(rf"{re.escape(prefix)}-(\d+)\.weights\.h5$")

    def path(self, number):
        return os.path.join(self.directory, f"{self.prefix}-{number:0{self.digits}d}.weights.h5")

    def found(self):
        """`[(number, path)]` of the checkpoints present, oldest first."""
        found = []
        for path in glob.glob(os.path.join(glob.escape(self.directory),
                                           f"{self.prefix}-*.weights.h5")):
            match = self._name.search(path)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def newest(self):
        """`(number, path)` of the newest checkpoint, or `(0, None)`."""
        found = self.found()
        return found[-1] if found else (0, None)

    def save(self, model, number, keep):
        """Writes checkpoint `number` of `model` and keeps the newest `keep`. Once the space is
        known to be there, the oldest go first, so that the disk holds `keep` checkpoints at
        most, not keep + 1 while the new one is written (with keep=1, the old one goes only
        after the new one is written)."""
        check_positive_ints(keep=keep)
        os.makedirs(self.directory, exist_ok=True)
        path = self.path(number)
        old = [p for _, p in self.found() if p != path]
        doomed = old[:len(old) - (keep - 1)] if keep > 1 else []
        freed = sum(os.path.getsize(p) for p in doomed if os.path.exists(p))
        check_free_space(path, weights_bytes(model) - freed, path)
        _remove(doomed)
        save_weights_atomically(model, path)
        if keep == 1:
            _remove(old)


class Checkpoint(keras.callbacks.Callback):
    """Saves model + optimizer at every Keras epoch end (a checkpoint interval, or the part of
    one a callback stopped) into `directory`, numbered by step (`CheckpointFiles`); keeps the
    last two. An interval whose loss is NaN or infinite (`TerminateOnNaN`) is not saved: the
    last good checkpoint stays the newest."""

    def __init__(self, directory, keep=2):
        super().__init__()
        check_positive_ints(keep=keep)
        self.files, self.keep = CheckpointFiles(directory), keep

    def on_epoch_end(self, epoch, logs=None):
        if not math.isfinite((logs or {}).get("loss", 0.0)):
            return
        self.files.save(self.model, int(self.model.optimizer.iterations.numpy()), self.keep)


def save_weights_atomically(model, path):
    """Writes the file `model.save_weights(path)` writes (the same Keras layout, read back by
    `model.load_weights`) into a temporary file renamed into place, after checking the disk has
    room for it.

    Keras's own writer goes through HDF5's file driver, which meets a write that fails (a disk
    that fills up meanwhile, a file-size limit) with thousands of "Exception ignored" tracebacks
    and a segfault; written through a Python file object (`files.hdf5_for_writing`), the same
    failure is one `OSError` naming `path`.
    """
    def write(tmp):
        with hdf5_for_writing(tmp) as f:
            save_weights_to_h5(model, f)

    if not model.built:
        raise ValueError("save_weights_atomically needs a built model.")
    write_atomically(path, write, needed_bytes=weights_bytes(model))


def weights_bytes(model):
    """About what `save_weights` writes: the model's and its optimizer's variables, plus 1 MB."""
    variables = model.weights + (model.optimizer.variables if model.optimizer else [])
    return variables_bytes(variables) + 2**20


def _remove(paths):
    for path in paths:
        with contextlib.suppress(FileNotFoundError):  # another worker's, in a shared dir
            os.remove(path)


def restore(lm, directory, strategy):
    """Loads the newest whole checkpoint (under multi-worker: the newest every worker has
    whole); returns its step (0 when there is none). A damaged newest checkpoint (truncated by
    a full disk or a copy, ...) is named in a warning and the one before it is loaded; a
    ValueError when every one is damaged. Removes what a killed save left behind."""
    remove_stale_temporaries(directory)
    found = dict(CheckpointFiles(directory).found())
    damaged = {}

    def newest_whole():  # -1: there are checkpoints, all damaged
        for number in sorted(set(found) - set(damaged), reverse=True):
            problem = damage(found[number])
            if problem is None:
                return number
            _damaged(damaged, found[number], number, problem)
        return -1 if found else 0

    step = newest_whole()
    if is_multi_worker(strategy):  # a worker killed while saving may lack the newest one
        newest = strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant([step], tf.int64))
        step = int(tf.reduce_min(strategy.gather(newest, axis=0)))
    while step:
        if step < 0:
            raise ValueError(f"every checkpoint in {directory} is damaged"
                             + (f": {'; '.join(damaged.values())}" if damaged else
                                " on a worker") + ". Move them away to train the run again "
                             "from its start.")
        if step not in found:
            name = os.path.basename(CheckpointFiles(directory).path(step))
            raise ValueError(f"{directory} lacks {name}, the newest checkpoint the other "
                             "workers have; restore it from another worker's --output.")
        try:
            lm.load_weights(found[step])
            break
        except (OSError, ValueError) as error:  # damaged where the quick check does not look
            if _load_in_earlier_order(lm, found[step]):
                break
            if is_multi_worker(strategy):
                raise ValueError(f"{found[step]} cannot be loaded ({error}); restore it from "
                                 "another worker's --output.") from None
            _damaged(damaged, found[step], step, str(error).splitlines()[0])
            step = newest_whole()
    lm.reset_states()
    return max(step, 0)


def _load_in_earlier_order(lm, path):
    """Loads a checkpoint of elmo-tf 0.1 (before 64f6ca4), whose optimizer state (SparseAdagrad's
    then: one accumulator a variable) lists the language model's own variables (its softmax)
    before its backbone's, where `lm`'s list them after: a copy beside it with the accumulators
    renumbered to `lm`'s order is loaded, then removed. Returns False, loading nothing, for any
    other file (or one damaged beyond its header)."""
    variables = lm.trainable_variables
    backbone = {id(v) for v in lm.backbone.trainable_variables}
    earlier = ([i for i, v in enumerate(variables) if id(v) not in backbone]
               + [i for i, v in enumerate(variables) if id(v) in backbone])
    if earlier == sorted(earlier):
        return False
    try:
        with h5py.File(path, "r") as f:
            saved = f.get("optimizer/vars")
            if (not isinstance(saved, h5py.Group)
                    or set(saved) != {str(i) for i in range(2 + len(variables))}
                    or any(saved[str(2 + old)].shape != tuple(variables[now].shape)
                           for old, now in enumerate(earlier))):
                return False
    except Exception:  # noqa: BLE001: damaged (h5py's errors vary): not this one
        return False
    directory = os.path.dirname(path)
    check_free_space(directory, os.path.getsize(path), "reading a checkpoint of elmo-tf 0.1 "
                     "(a renumbered copy beside it)")
    with locked_temporary(directory, os.path.basename(path), is_directory=True) as scratch:
        copy = os.path.join(scratch, os.path.basename(path))  # Keras reads `*.weights.h5` only
        try:
            shutil.copyfile(path, copy)
            with h5py.File(copy, "r+") as f:
                saved = f["optimizer/vars"]
                for old in range(len(earlier)):  # names only: the data is not read
                    saved.move(str(2 + old), f"earlier_{old}")
                for old, now in enumerate(earlier):
                    saved.move(f"earlier_{old}", str(2 + now))
            lm.load_weights(copy)
        except (OSError, ValueError):  # damaged beyond its header: the caller names it
            return False
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    logger.info("%s was written by elmo-tf 0.1: its optimizer state was read in that version's "
                "order of the variables", path)
    return True


def trained_past(directory, total):
    """The step of the newest whole checkpoint in `directory` past step `total`, or 0: a run
    that has trained more steps than a command asks of it (read from the files, before any
    model is built)."""
    return max((number for number, path in CheckpointFiles(directory).found()
                if number > total and damage(path) is None), default=0)


def _damaged(damaged, path, number, problem):
    damaged[number] = f"{path} ({problem})"
    logger.warning("%s is damaged (%s); resuming from the checkpoint before it, if any", path,
                   problem)


def damage(path):
    """What is wrong with the HDF5 file `path`, or None: a file HDF5 cannot open (a truncated
    one, a file of zeros) or a dataset whose bytes run past the end of the file. Reads the
    file's structure, not its data, so that a damaged checkpoint is found before Keras meets
    it halfway through loading. An unreadable file (permissions) is an error, not damage."""
    size = os.path.getsize(path)

    def check(name, item):
        if isinstance(item, h5py.Dataset):
            offset = item.id.get_offset()
            if offset is not None and offset + item.id.get_storage_size() > size:
                raise OSError(f"its dataset {name} runs past the end of the file")

    try:
        with h5py.File(path, "r") as f:
            f.visititems(check)
    except PermissionError:
        raise
    except (OSError, RuntimeError, KeyError, ValueError) as error:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return None
