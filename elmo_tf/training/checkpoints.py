"""Checkpoints of a training run: written atomically every interval, the newest restored on
resume (under multi-worker: the newest that every worker has), a killed save's leftovers
removed."""

import contextlib
import glob
import os
import re

import keras
import numpy as np
import tensorflow as tf

from elmo_tf.files import check_free_space, write_atomically
from elmo_tf.training.distribution import is_multi_worker

_CHECKPOINT = re.compile(r"ckpt-(\d+)\.weights\.h5$")
_STAGED = ".weights.h5"  # the suffix of a checkpoint's staging file (`write_atomically`'s + it)


class Checkpoint(keras.callbacks.Callback):
    """Saves model + optimizer at every Keras epoch end (a checkpoint interval), atomically;
    keeps the last two."""

    def __init__(self, directory, keep=2):
        super().__init__()
        self.directory, self.keep = directory, keep

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training:  # TerminateOnNaN: keep the last good checkpoint
            return
        step = int(self.model.optimizer.iterations.numpy())
        path = os.path.join(self.directory, f"ckpt-{step:09d}.weights.h5")
        # The oldest go first, so that the disk holds `keep` checkpoints at most, not keep + 1
        # while the new one is written.
        for old in _checkpoints(self.directory)[:-(self.keep - 1) or None]:
            with contextlib.suppress(FileNotFoundError):  # another worker's, in a shared dir
                os.remove(old[1])
        save_weights_atomically(self.model, path)


def save_weights_atomically(model, path):
    """`model.save_weights(path)` into a temporary file renamed into place, after checking the
    disk has room for it (Keras's HDF5 writer crashes the process on a full disk)."""
    variables = model.weights + (model.optimizer.variables if model.optimizer else [])
    check_free_space(path, sum(_nbytes(v) for v in _unique(variables)) + 2**20,
                     f"{path} (the model's and its optimizer's weights)")

    def write(tmp):
        staged = tmp + _STAGED  # Keras insists on the suffix
        try:
            model.save_weights(staged)
            os.replace(staged, tmp)
        finally:
            if os.path.exists(staged):
                os.remove(staged)

    write_atomically(path, write)


def _nbytes(variable):
    return int(np.prod(variable.shape)) * np.dtype(variable.dtype).itemsize


def _unique(variables):
    seen = {}
    for v in variables:
        seen.setdefault(id(v), v)
    return list(seen.values())


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
    for pattern in ("*.tmp", "*.tmp" + _STAGED):
        for staged in glob.glob(os.path.join(directory, pattern)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(staged)
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
