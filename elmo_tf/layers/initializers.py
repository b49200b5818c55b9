"""Weight initialisation that can be skipped when every weight is about to be loaded."""

import contextlib
import contextvars

import tensorflow as tf

_SKIP = contextvars.ContextVar("elmo_tf_skip_initialization", default=False)


@contextlib.contextmanager
def skip_initialization():
    """Within this context, elmo_tf layers create their weights uninitialised.

    Only for models whose every weight is assigned right after construction
    (`ElmoBackbone.from_allennlp`): random initialisers cost time and temporary memory, and even
    zeros make every page of the model resident twice over while it loads. Uninitialised
    buffers are never touched before the loaded values replace them.

    Example:
    >>> with skip_initialization():
    ...     backbone = ElmoBackbone(config)
    >>> elmo_weights.load(backbone, "weights.hdf5")  # assigns every weight
    """
    token = _SKIP.set(True)
    try:
        yield
    finally:
        _SKIP.reset(token)


def initializer(init):
    """`init`, or an uninitialised-memory initialiser inside `skip_initialization()`."""
    return _uninitialized if _SKIP.get() else init


def _uninitialized(shape, dtype=None):
    return tf.raw_ops.Empty(shape=shape, dtype=tf.as_dtype(dtype or "float32"), init=False)
