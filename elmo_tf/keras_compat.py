"""Every place elmo-tf reaches into Keras's or TensorFlow's private API, in one file: each
hook says why it is needed and which upstream issue would make it unnecessary.

They are written for the Keras in `setup.cfg` (`KERAS_VERSIONS`): `check_keras_version` refuses
another one with a clear message, rather than letting a hook fail deep inside a run.
"""

import keras

# Keras minor versions these hooks were written and tested against.
KERAS_VERSIONS = ("3.15",)


def check_keras_version(version=None):
    """Raises ImportError naming the Keras version found and the ones elmo-tf's private hooks
    were written for, unless `version` (by default the installed Keras's) is one of them."""
    version = keras.__version__ if version is None else version
    if ".".join(version.split(".")[:2]) not in KERAS_VERSIONS:
        raise ImportError(
            f"elmo-tf reaches into Keras internals written for Keras "
            f"{' or '.join(KERAS_VERSIONS)}.x, and Keras {version} is installed; install the "
            f"version setup.cfg pins (pip install -e . does) or port elmo_tf/keras_compat.py.")


check_keras_version()


def sublayers(layer):
    """Every layer inside `layer` (itself excluded), at any depth: those a functional model
    lists, and those held as attributes (a `Bidirectional`'s two directions, an
    `ElmoEmbedding`'s backbone). Keras 3 has no public recursive walk
    (`Layer._flatten_layers`, private; `Model.layers` is one level deep)."""
    return list(layer._flatten_layers(include_self=False, recursive=True))
