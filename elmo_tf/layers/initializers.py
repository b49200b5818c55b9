"""Weight initialisation that a layer skips when every weight is about to be loaded."""

import tensorflow as tf


def initializer(init, initialize=True):
    """`init`, or, when `initialize` is false, an initialiser that leaves the memory
    uninitialised.

    For layers whose every weight is assigned right after they are built
    (`CharLSTMBackbone.from_allennlp` builds its backbone with `initialize=False`): random
    initialisers cost time and temporary memory, and even zeros make every page of the model
    resident twice over while it loads. Uninitialised buffers are never read before the loaded
    values replace them.

    Example:
    >>> self.kernel = self.add_weight(shape=(n, m), initializer=initializer(
    ...     "glorot_uniform", self.initialize_weights))
    """
    return init if initialize else _uninitialized


def _uninitialized(shape, dtype=None):
    return tf.raw_ops.Empty(shape=shape, dtype=tf.as_dtype(dtype or "float32"), init=False)
