"""A frozen biLM's outputs of a split's texts, computed once and kept in a file for the layers
after the biLM to train on (`finetune`)."""

import os
import tempfile

import numpy as np
import tensorflow as tf

from elmo_tf.files import readable_size


class FrozenOutputs:
    """One char-ids feature's frozen biLM outputs of a split's texts (`layers_with_boundaries`,
    each text's at its own length), in a file: float32 rows `[layers, dim]`, text `i` at rows
    `offsets[i]:offsets[i + 1]` (its tokens and its two boundaries), memory-mapped
    (`np.memmap`). The operating system keeps in memory what fits of it and reads the rest from
    disk, so a large task's outputs take disk space, not memory; the input pipeline reads a
    batch of texts at a time (`rows`).

    Args:
        directory: where the file is made (a new name each time; the caller removes it).
        lengths: each text's rows (its tokens + 2).
        layers, dim: the biLM's layers and output width.

    The file's space is taken when it is made (an `OSError` naming the directory where it is
    short, where the file system reserves space); `close` unmaps it.

    Example:
    >>> outputs = FrozenOutputs("scratch", lengths=[5, 3], layers=3, dim=32)
    >>> outputs.write(0, np.zeros([5, 3, 32], np.float32))
    >>> layers, lengths = outputs.rows(tf.constant([1, 0]))  # [2, 5, 3, 32] (zero-padded), [3, 5]
    >>> outputs.close()
    """

    def __init__(self, directory, lengths, layers, dim):
        self.lengths = np.asarray(lengths, np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        # (a file of 0 bytes cannot be mapped: one row more than the texts have)
        shape = (int(self.offsets[-1]) + 1, layers, dim)
        fd, self.path = tempfile.mkstemp(dir=directory, prefix="bilm-outputs-", suffix=".f32")
        size = int(np.prod(shape)) * 4
        try:  # the space taken now: a disk that fills later is an error here, not a SIGBUS
            # (where the file system reserves it: not on copy-on-write ones such as ZFS; and
            # without `posix_fallocate`, as on macOS, a sparse file as before)
            getattr(os, "posix_fallocate", lambda fd, offset, size: os.ftruncate(fd, size))(
                fd, 0, size)
        except OSError as error:
            os.close(fd)
            os.remove(self.path)
            raise OSError(error.errno, f"the frozen biLM's outputs need {readable_size(size)} "
                                       f"in {directory}: {error.strerror}") from None
        os.close(fd)
        self.values = np.memmap(self.path, np.float32, "r+", shape=shape)
        self.shape = shape

    @property
    def nbytes(self):
        """The outputs' bytes (the texts' rows)."""
        return int(self.offsets[-1]) * self.shape[1] * self.shape[2] * 4

    def write(self, index, layers):
        """Text `index`'s outputs, `[lengths[index], layers, dim]`."""
        self.values[self.offsets[index]:self.offsets[index + 1]] = layers

    def texts(self, indices):
        """NumPy: the outputs of texts `indices`, `[n, longest, layers, dim]` (zeros past each
        text's rows), and their rows `[n]`."""
        values, indices = self.values, np.asarray(indices, np.int64)
        if values is None:
            raise ValueError(f"{self.path} was closed")
        lengths = self.lengths[indices]
        out = np.zeros((len(indices), int(lengths.max(initial=0)), *values.shape[1:]),
                       np.float32)
        for row, index in enumerate(indices):
            out[row, :lengths[row]] = values[self.offsets[index]:self.offsets[index + 1]]
        return out, lengths.astype(np.int32)

    def close(self):
        """Unmaps the file (its space is freed once it is removed too). A `tf.numpy_function`
        traced in a `tf.data` pipeline stays referenced by TensorFlow's default graph for the
        life of the process, and with it this object: without `close`, a removed file would
        hold its disk space until the process ends."""
        self.values = None

    def rows(self, indices):
        """`texts` as tensors (a `tf.numpy_function`: it runs in a `tf.data` pipeline and
        eagerly)."""
        layers, lengths = tf.numpy_function(self.texts, [indices], [tf.float32, tf.int32],
                                            stateful=False)
        layers.set_shape([None, None, *self.shape[1:]])
        lengths.set_shape([None])
        return layers, lengths
