"""`save_weights_atomically` writes what Keras's `save_weights` writes (through a Python file
object, so that a failed write is an OSError, see tests/test_bad_inputs.py)."""

import h5py
import keras
import numpy as np

from elmo_tf.training.checkpoints import save_weights_atomically


def _contents(path):
    """Every group's and dataset's attributes and every dataset's value, by name."""
    found = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            value = obj[()] if isinstance(obj, h5py.Dataset) else None
            found[name] = ({k: str(v) for k, v in obj.attrs.items()}, value)

        f.visititems(visit)
        found["/"] = ({k: str(v) for k, v in f.attrs.items()}, None)
    return found


def test_the_file_is_keras_save_weights_file_and_loads_back(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adagrad(0.1), loss="mse")
    model.fit(np.ones((8, 3)), np.zeros((8, 2)), verbose=0)  # optimizer state that is not 0
    model.save_weights(tmp_path / "keras.weights.h5")
    save_weights_atomically(model, tmp_path / "ours.weights.h5")
    want, got = _contents(tmp_path / "keras.weights.h5"), _contents(tmp_path / "ours.weights.h5")
    assert got.keys() == want.keys()
    for name, (attrs, value) in want.items():
        assert got[name][0] == attrs, name
        if value is not None:
            np.testing.assert_array_equal(got[name][1], value, err_msg=name)
    other = keras.models.clone_model(model)
    other.compile(optimizer=keras.optimizers.Adagrad(0.1), loss="mse")
    other.optimizer.build(other.trainable_variables)
    other.load_weights(tmp_path / "ours.weights.h5")
    for a, b in zip(model.weights + model.optimizer.variables,
                    other.weights + other.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keras.weights.h5", "ours.weights.h5"]
