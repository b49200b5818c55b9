"""`FrozenOutputs`: texts' rows written to a memory-mapped file come back as written, padded with
zeros, through NumPy and through a `tf.data` pipeline; the file's space is taken when it is made,
and a failure to take it leaves nothing behind."""

import errno
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.training.frozen_outputs import FrozenOutputs

LAYERS, DIM = 3, 4


def _written(directory, lengths, seed=0):
    """A `FrozenOutputs` of texts of `lengths` rows, each written with random rows; and the
    rows (a list of NumPy arrays, the independent expectation)."""
    rng = np.random.default_rng(seed)
    outputs = FrozenOutputs(str(directory), lengths, LAYERS, DIM)
    expected = [rng.standard_normal([n, LAYERS, DIM]).astype(np.float32) for n in lengths]
    for index in rng.permutation(len(lengths)):  # written in any order
        outputs.write(index, expected[index])
    return outputs, expected


def _padded(expected, indices):
    longest = max(len(expected[i]) for i in indices)
    out = np.zeros([len(indices), longest, LAYERS, DIM], np.float32)
    for row, index in enumerate(indices):
        out[row, :len(expected[index])] = expected[index]
    return out


def test_texts_come_back_as_written_zero_padded_and_the_file_holds_their_rows(tmp_path):
    lengths = [5, 2, 7, 3]
    outputs, expected = _written(tmp_path, lengths)
    # The file: every text's rows (and one spare row), float32, its space taken.
    assert os.path.dirname(outputs.path) == str(tmp_path)
    assert os.path.getsize(outputs.path) == (sum(lengths) + 1) * LAYERS * DIM * 4
    assert outputs.nbytes == sum(lengths) * LAYERS * DIM * 4
    for indices in ([2, 0], [1], [3, 1, 2, 0], [0, 0]):
        values, rows = outputs.texts(indices)
        np.testing.assert_array_equal(values, _padded(expected, indices))
        np.testing.assert_array_equal(rows, [lengths[i] for i in indices])
        assert rows.dtype == np.int32
    # Through the file, not only the mapping of this object: another mapping reads the same.
    again = np.memmap(outputs.path, np.float32, "r", shape=outputs.shape)
    np.testing.assert_array_equal(again[lengths[0]:lengths[0] + lengths[1]], expected[1])
    del again
    outputs.close()
    with pytest.raises(ValueError, match="was closed"):
        outputs.texts([0])


def test_rows_in_a_tf_data_pipeline_and_eagerly(tmp_path):
    lengths = [4, 1, 6, 2, 3]
    outputs, expected = _written(tmp_path, lengths, seed=1)
    batches = tf.data.Dataset.range(len(lengths)).batch(2).map(outputs.rows)
    assert batches.element_spec[0].shape.as_list() == [None, None, LAYERS, DIM]
    seen = 0
    for start, (values, rows) in zip(range(0, len(lengths), 2), batches):
        indices = list(range(start, min(start + 2, len(lengths))))
        np.testing.assert_array_equal(values.numpy(), _padded(expected, indices))
        np.testing.assert_array_equal(rows.numpy(), [lengths[i] for i in indices])
        seen += len(indices)
    assert seen == len(lengths)
    values, rows = outputs.rows(tf.constant([2, 1], tf.int64))  # eagerly
    np.testing.assert_array_equal(values.numpy(), _padded(expected, [2, 1]))
    outputs.close()


def test_a_file_whose_space_cannot_be_taken_is_an_error_naming_the_directory_and_is_removed(
        tmp_path, monkeypatch):
    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    with pytest.raises(OSError, match=rf"need [0-9,]+ bytes in {re.escape(str(tmp_path))}: "
                                      "No space left") as error:
        FrozenOutputs(str(tmp_path), [100, 200], LAYERS, DIM)
    assert error.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []  # nothing half-made left
