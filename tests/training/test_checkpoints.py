"""`save_weights_atomically` writes what Keras's `save_weights` writes (through a Python file
object, so that a failed write is an OSError, see tests/test_bad_inputs.py); which checkpoints
a command may not write out as a shorter run (`relabelled_steps`)."""

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


def test_a_total_below_what_a_run_was_given_and_trained_is_a_relabel_and_no_other(tmp_path):
    """`relabelled_steps`: a run trained to a checkpoint is refused a total below it only where
    that total is below the one the run was last given (or the run was given minutes); a total
    the run was given, which its plan rounds up (10 steps, a checkpoint every 4: 12), is not;
    a damaged newest checkpoint does not count."""
    from elmo_tf.training.pretraining import checkpoint_plan, relabelled_steps

    _, intervals, interval = checkpoint_plan(total=10, every=4)
    trained = intervals * interval
    assert trained == 12  # the plan the run trained
    for step in (interval, trained):
        with h5py.File(tmp_path / f"ckpt-{step:09d}.weights.h5", "w") as f:
            f["w"] = np.zeros(3)
    assert relabelled_steps(tmp_path, {"steps": 10}, 10) == 0  # the same command again
    assert relabelled_steps(tmp_path, {"steps": 10}, 11) == 0  # more: its plan's steps
    assert relabelled_steps(tmp_path, {"corpus_size": {}}, 10) == 0  # elmo-tf 0.2's: no total
    assert relabelled_steps(tmp_path, {"steps": 10}, 6) == 12
    assert relabelled_steps(tmp_path, {"minutes": 0.5}, 11) == 12  # no total of its own
    assert relabelled_steps(tmp_path, {"steps": 10}, 12) == 0  # trained no further
    (tmp_path / f"ckpt-{trained:09d}.weights.h5").write_bytes(b"\0" * 64)  # damaged
    assert relabelled_steps(tmp_path, {"steps": 10}, 6) == 0
    assert relabelled_steps(tmp_path, {"steps": 10}, 3) == 4
