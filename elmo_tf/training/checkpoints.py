"""Checkpoints of a training run: written atomically every interval, the newest restored on
resume (under multi-worker: the newest that every worker has), a killed save's leftovers
removed."""

import contextlib
import glob
import os
import re

import keras
import tensorflow as tf

from elmo_tf.checks import check_positive_ints
from elmo_tf.files import (
    check_free_space,
    hdf5_for_writing,
    remove_stale_temporaries,
    variables_bytes,
    write_atomically,
)
from elmo_tf.keras_compat import save_weights_to_h5
from elmo_tf.training.distribution import is_multi_worker

_CHECKPOINT = re.compile(r"ckpt-(\d+)\.weights\.h5$")


class Checkpoint(keras.callbacks.Callback):
    """Saves model + optimizer at every Keras epoch end (a checkpoint interval), atomically;
    keeps the last two."""

    def __init__(self, directory, keep=2):
        super().__init__()
        check_positive_ints(keep=keep)
        self.directory, self.keep = directory, keep

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training:  # TerminateOnNaN: keep the last good checkpoint
            return
        step = int(self.model.optimizer.iterations.numpy())
        path = os.path.join(self.directory, f"ckpt-{step:09d}.weights.h5")
        old = [p for _, p in _checkpoints(self.directory) if p != path]
        # Once the space is known to be there, the oldest go first, so that the disk holds
        # `keep` checkpoints at most, not keep + 1 while the new one is written (with keep=1,
        # the old one goes only after the new one is written).
        doomed = old[:len(old) - (self.keep - 1)] if self.keep > 1 else []
        freed = sum(os.path.getsize(p) for p in doomed if os.path.exists(p))
        check_free_space(path, weights_bytes(self.model) - freed, path)
        _remove(doomed)
        save_weights_atomically(self.model, path)
        if self.keep == 1:
            _remove(old)


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


def _checkpoints(directory):
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.weights.h5")):
        match = _CHECKPOINT.search(path)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def restore(lm, directory, strategy):
    """Loads the newest checkpoint (under multi-worker: the newest every worker has); returns
    its step (0 when there is none). Removes what a killed save left behind."""
    remove_stale_temporaries(directory)
    found = dict(_checkpoints(directory))
    step = max(found, default=0)
    if is_multi_worker(strategy):  # a worker killed while saving may lack the newest one
        newest = strategy.experimental_distribute_values_from_function(
            lambda context: tf.constant([step], tf.int64))
        step = int(tf.reduce_min(strategy.gather(newest, axis=0)))
    if not step:
        return 0
    if step not in found:
        raise ValueError(f"{directory} lacks ckpt-{step:09d}.weights.h5, the newest checkpoint "
                         "the other workers have; restore it from another worker's --output.")
    lm.load_weights(found[step])
    lm.reset_states()
    return step
