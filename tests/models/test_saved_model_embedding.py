import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import ElmoEmbedding
from elmo_tf.export import export_saved_model
from elmo_tf.models.saved_model_embedding import SavedModelEmbedding

TOKENS = [["the", "cat", "sat"], ["a", "dog", ""], ["hello", "", ""], ["ok", "then", ""]]
LABELS = [0, 1, 0, 1]


@pytest.fixture(scope="module")
def export_dir(tiny_model_files, tmp_path_factory):
    _, _, options_file, weight_file = tiny_model_files
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0)
    return export_saved_model(elmo, tmp_path_factory.mktemp("serving") / "elmo")


def _classifier(elmo):
    tokens = keras.Input(shape=(None,), dtype="string")
    model = keras.Model(tokens, keras.layers.Dense(2)(
        keras.layers.GlobalAveragePooling1D()(elmo(tokens))))
    model.compile(keras.optimizers.Adam(0.05),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_keras3_fine_tunes_the_exported_mix_with_adam(export_dir, tmp_path):
    # Seeded: the head's initialisation must not depend on what the worker ran before (one
    # unseeded draw left a mix weight moving less than 1e-3 in 3 steps).
    keras.utils.set_random_seed(0)
    elmo = ElmoEmbedding.from_saved_model(export_dir)
    assert isinstance(elmo, SavedModelEmbedding)
    assert sorted(v.name.rsplit("_", 1)[-1] for v in elmo.trainable_weights) == [
        "gamma", "weights"]
    model = _classifier(elmo)
    before = [v.numpy().copy() for v in elmo.trainable_weights]
    model.fit(tf.constant(TOKENS), np.array(LABELS), epochs=3, verbose=0)
    after = [v.numpy() for v in elmo.trainable_weights]
    assert all(np.abs(a - b).max() > 1e-3 for a, b in zip(before, after))
    # The SavedModel's own variables moved: its signatures see the fine-tuned mix.
    served = elmo._module.signatures["tokens"](tokens=tf.constant(TOKENS),
                                               sequence_len=tf.constant([3, 2, 1, 2]))
    np.testing.assert_allclose(served["elmo"], elmo(tf.constant(TOKENS)), atol=1e-6)
    # The mask reaches the pooling: padding does not enter the average.
    pooled = keras.Model(model.input, model.layers[-2].output)(tf.constant(TOKENS)).numpy()
    np.testing.assert_allclose(pooled[2], elmo(tf.constant(TOKENS)).numpy()[2, 0], atol=1e-6)
    model.save(tmp_path / "classifier.keras")
    reloaded = keras.models.load_model(tmp_path / "classifier.keras", safe_mode=False)
    np.testing.assert_allclose(reloaded(tf.constant(TOKENS)), model(tf.constant(TOKENS)),
                               atol=1e-6)


def test_the_exported_l2_penalty_reaches_keras_losses(tiny_model_files, tmp_path):
    _, _, options_file, weight_file = tiny_model_files
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0, l2_coef=0.1)
    elmo.build((None, None))
    elmo.scalar_mixes[0].scalar_weights.assign([1.0, 2.0, 0.0])
    loaded = ElmoEmbedding.from_saved_model(export_saved_model(elmo, tmp_path / "l2"))
    ragged = tf.ragged.constant([["the", "cat"], ["hi"]])
    np.testing.assert_allclose(loaded(ragged), elmo(ragged), atol=1e-6)  # ragged input too
    np.testing.assert_allclose(sum(loaded.losses), 0.1 * 5.0, rtol=1e-6)
    np.testing.assert_allclose(sum(loaded.losses), sum(elmo.losses), rtol=1e-6)


def test_frozen_when_not_trainable(export_dir):
    elmo = ElmoEmbedding.from_saved_model(export_dir, trainable=False)
    assert not elmo.trainable_weights and len(elmo.weights) > 2
    with pytest.raises(ValueError, match="lacks the reusable SavedModel API"):
        plain = export_dir + "-plain"
        tf.saved_model.save(tf.Module(), plain)
        SavedModelEmbedding(plain)


def test_tf_keras_hub_keras_layer_fine_tunes_in_a_process_without_elmo_tf(export_dir):
    pytest.importorskip("tensorflow_hub")
    code = f"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf, tensorflow_hub as hub, tf_keras
elmo = hub.KerasLayer({export_dir!r}, trainable=True)
tokens = tf_keras.Input(shape=(None,), dtype=tf.string)
model = tf_keras.Model(tokens, tf_keras.layers.Dense(2)(
    tf_keras.layers.GlobalAveragePooling1D()(elmo(tokens))))
model.compile(tf_keras.optimizers.Adam(0.05),
              tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = [v.numpy().copy() for v in elmo.trainable_weights]
model.fit(tf.constant({TOKENS!r}), np.array({LABELS!r}), epochs=3, verbose=0)
assert len(before) == 2, len(before)
assert all(np.abs(b - v.numpy()).max() > 1e-3 for b, v in zip(before, elmo.trainable_weights))
assert "elmo_tf" not in sys.modules
print("ok")
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


class _WritesAFileWhenLoaded(tf.saved_model.experimental.TrackableResource):
    """An attacker's SavedModel: a resource whose initializer, which `tf.saved_model.load` runs,
    writes a file."""

    def __init__(self, marker):
        self.marker = str(marker)
        super().__init__()

    def _create_resource(self):
        return tf.raw_ops.HashTableV2(key_dtype=tf.string, value_dtype=tf.string)

    def _initialize(self):
        return tf.io.write_file(self.marker, "written while loading")


def _attack(tmp_path, legit_keras, export):
    """(a `.keras` file whose SavedModelEmbedding names an attacker's SavedModel instead of
    `export`, the file that SavedModel writes when loaded)."""
    import json
    import zipfile

    marker = tmp_path / "written-by-the-attack"
    module = tf.Module()
    module.resource = _WritesAFileWhenLoaded(marker)
    tf.saved_model.save(module, str(tmp_path / "attack_saved_model"))
    marker.unlink(missing_ok=True)  # saving ran the initializer too
    attack = tmp_path / "attack.keras"
    with zipfile.ZipFile(legit_keras) as source, zipfile.ZipFile(attack, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                data = json.dumps(json.loads(data)).replace(
                    json.dumps(str(export))[1:-1],
                    str(tmp_path / "attack_saved_model")).encode()
            target.writestr(item, data)
    assert str(tmp_path / "attack_saved_model") in zipfile.ZipFile(attack).read(
        "config.json").decode()
    return attack, marker


def test_keras_safe_mode_refuses_a_keras_file_that_loads_a_saved_model(export_dir, tmp_path):
    """As Keras refuses its own TFSMLayer: a `.keras` file naming a SavedModel (whose graph
    runs at load) loads only with safe_mode=False. The attack writes nothing in safe mode, in
    this process after the documented `from_saved_model` and in a fresh process after
    `import elmo_tf`, where a legitimate file loads (with safe_mode=False) to the same outputs."""
    model = _classifier(ElmoEmbedding.from_saved_model(export_dir))
    model.save(tmp_path / "legit.keras")
    expected = model(tf.constant(TOKENS)).numpy()
    np.save(tmp_path / "expected.npy", expected)
    attack, marker = _attack(tmp_path, tmp_path / "legit.keras", export_dir)
    with pytest.raises(ValueError, match=r"deserialization of a `SavedModelEmbedding`, which "
                                         r"loads an external SavedModel .*`safe_mode=False`"):
        keras.saving.load_model(attack)
    assert not marker.exists()
    # The attack is real: trusted explicitly, the SavedModel's initializer runs as it loads.
    with pytest.raises(ValueError, match="lacks the reusable SavedModel API"):
        keras.saving.load_model(attack, safe_mode=False)
    assert marker.exists()
    marker.unlink()
    code = f"""
import os, sys
import keras, numpy as np, tensorflow as tf
import elmo_tf
try:
    keras.saving.load_model({str(attack)!r})
    sys.exit("loaded the attack in safe mode")
except ValueError as error:
    assert "safe_mode=False" in str(error), error
assert not os.path.exists({str(marker)!r}), "the attack ran"
model = keras.saving.load_model({str(tmp_path / 'legit.keras')!r}, safe_mode=False)
expected = np.load({str(tmp_path / 'expected.npy')!r})
np.testing.assert_allclose(model(tf.constant({TOKENS!r})), expected, atol=1e-6)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
