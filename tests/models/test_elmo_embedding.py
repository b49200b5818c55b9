import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import ElmoBackbone, ElmoEmbedding, tokens_to_char_ids
from tests import reference
from tests.conftest import assert_serializable

TOKENS = [["The", "cat", "sat", "."], ["Hello", "", "", ""]]


@pytest.fixture
def elmo(tiny_model):
    _, _, options_file, weight_file = tiny_model
    return ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0)


def test_strings_ragged_lists_and_char_ids_give_the_same_output_and_mask(elmo):
    dense = elmo(tf.constant(TOKENS))
    assert dense.shape == (2, 4, 16)
    for other in (tf.ragged.constant([["The", "cat", "sat", "."], ["Hello"]]), TOKENS,
                  np.array(TOKENS), tokens_to_char_ids(TOKENS)):
        np.testing.assert_array_equal(elmo(other), dense)
    expected_mask = [[True] * 4, [True] + [False] * 3]
    assert elmo.compute_mask(tf.constant(TOKENS)).numpy().tolist() == expected_mask
    assert dense._keras_mask.numpy().tolist() == expected_mask


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_matches_allennlp_elmo_on_the_reference(tiny_model, do_layer_norm):
    options, weights, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, do_layer_norm=do_layer_norm,
                                       dropout=0.0)
    out = elmo(tf.constant(TOKENS)).numpy()
    # AllenNLP mixes on the grid with <S>/</S> (layer-norm statistics include them), then
    # removes them.
    lengths = [4, 1]
    grid = np.zeros((3, 2, 6, 16))
    for row, n in enumerate(lengths):
        grid[:, row, :n + 2] = reference.bilm(TOKENS[row][:n], weights, options,
                                              keep_boundaries=True)[0]
    mask = np.arange(6)[None] < np.array(lengths)[:, None] + 2
    expected = reference.scalar_mix(grid, mask, np.zeros(3), 1.0, do_layer_norm)
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(out[row, :n], expected[row, 1:n + 1], atol=1e-4)
        assert not out[row, n:].any()


def test_mask_reaches_downstream_layers(elmo):
    tokens = keras.Input(shape=(None,), dtype="string")
    pooled = keras.layers.GlobalAveragePooling1D()(elmo(tokens))
    model = keras.Model(tokens, pooled)
    got = model(tf.constant(TOKENS)).numpy()
    vectors = elmo(tf.constant(TOKENS)).numpy()
    np.testing.assert_allclose(got[1], vectors[1, 0], atol=1e-6)  # padding not averaged in
    np.testing.assert_allclose(got[0], vectors[0].mean(0), atol=1e-6)


def test_representations_are_independent_mixes(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, num_output_representations=2,
                                       dropout=0.0)
    elmo(tf.constant(TOKENS))
    elmo.scalar_mixes[0].scalar_weights.assign([5.0, -5.0, 0.0])
    elmo.scalar_mixes[1].gamma.assign(2.0)
    first, second = elmo(tf.constant(TOKENS))
    layers = elmo.backbone(tokens_to_char_ids(TOKENS))["layers"].numpy()
    w = np.exp([5.0, -5.0, 0.0]) / np.exp([5.0, -5.0, 0.0]).sum()
    np.testing.assert_allclose(first, np.einsum("l,bltd->btd", w, layers), atol=1e-5)
    np.testing.assert_allclose(second, 2.0 * layers.mean(axis=1), atol=1e-5)


def test_several_representations_and_fixed_mix_parameters(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, num_output_representations=2,
                                       scalar_mix_parameters=[-9e9, 1.0, -9e9], dropout=0.0)
    first, second = elmo(tf.constant(TOKENS))
    layers = elmo.backbone(tokens_to_char_ids(TOKENS))["layers"].numpy()
    np.testing.assert_allclose(first, layers[:, 1], atol=1e-6)  # all weight on layer 1
    np.testing.assert_array_equal(first, second)
    assert not elmo.trainable_weights
    assert len(elmo.compute_mask(tf.constant(TOKENS))) == 2


def test_gradients_reach_the_mix_and_the_bilm_only_when_fine_tuned(tiny_model):
    _, _, options_file, weight_file = tiny_model
    for fine_tune in (False, True):
        elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, fine_tune=fine_tune,
                                           l2_coef=0.01)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(elmo(tf.constant(TOKENS), training=True) ** 2)
            loss += sum(elmo.losses)
        names = [v.path for v in elmo.trainable_weights]
        grads = tape.gradient(loss, elmo.trainable_weights)
        assert all(g is not None and np.abs(tf.convert_to_tensor(g)).sum() > 0 for g in grads)
        assert any("scalar_mix" in n for n in names)
        assert any("lstm" in n for n in names) == fine_tune
        assert len(elmo.losses) == 1  # the l2 penalty on the mix weights
        # Frozen, the tape does not differentiate through the biLM at all (it watches every
        # tf.Variable created trainable, which a Keras freeze leaves so: without a stop it
        # would, at every step, for nothing): no gradient reaches the biLM's weights even
        # when asked for.
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(elmo(tf.constant(TOKENS), training=True) ** 2)
        reached = [g is not None for g in tape.gradient(loss, elmo.backbone.weights)]
        assert all(reached) if fine_tune else not any(reached)
    # A part of a frozen biLM unfrozen by hand trains, as Keras lists it as trainable.
    elmo.fine_tune = False
    elmo.backbone.get_layer("bilm").trainable = True
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(elmo(tf.constant(TOKENS), training=True) ** 2)
    lstm = elmo.backbone.get_layer("bilm").trainable_weights
    assert lstm and {w.path for w in lstm} <= {w.path for w in elmo.trainable_weights}
    assert all(g is not None for g in tape.gradient(loss, lstm))


def test_a_parent_model_cannot_unfreeze_the_bilm_or_fixed_mixes(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, num_output_representations=2,
                                       scalar_mix_parameters=[0.0, 1.0, 2.0])
    tokens = keras.Input(shape=(None,), dtype="string")
    model = keras.Model(tokens, keras.layers.Concatenate()(elmo(tokens)))
    model.trainable = False
    model.trainable = True  # the usual freeze-then-unfreeze of a downstream model
    assert not model.trainable_weights
    elmo.fine_tune = True  # the one switch for the biLM
    assert len(model.trainable_weights) == len(elmo.backbone.weights)


def test_from_allennlp_passes_backbone_arguments(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, stateful=True,
                                       max_batch_size=3, dropout=0.1)
    assert elmo.backbone.stateful and elmo.backbone.max_batch_size == 3 and elmo.dropout == 0.1


def test_fit_with_strings_when_xla_is_asked_for(tiny_model):
    # Keras turns XLA on by itself on GPUs; string ops cannot compile, so the model opts out.
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0)
    tokens = keras.Input(shape=(None,), dtype="string")
    model = keras.Model(tokens, keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(
        elmo(tokens))))
    with pytest.warns(UserWarning, match="doesn't support `jit_compile=True`"):
        model.compile("adam", "mse", jit_compile=True)
    history = model.fit(tf.constant(TOKENS), np.array([0.0, 1.0]), epochs=2, verbose=0)
    assert not model.jit_compile and np.isfinite(history.history["loss"]).all()


def test_dropout_applies_in_training_only(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file)  # AllenNLP default 0.5
    assert elmo.dropout == 0.5
    inference = elmo(tf.constant(TOKENS)).numpy()
    trained = elmo(tf.constant(TOKENS), training=True).numpy()
    assert (trained[0] == 0).mean() > 0.3 and (inference[0] != 0).all()


def test_empty_batch_and_empty_sentences(elmo):
    assert elmo([]).shape == (0, 0, 16)
    assert elmo(tf.zeros([2, 0], tf.string)).shape == (2, 0, 16)
    assert elmo([[""], [""]]).shape == (2, 1, 16)


def test_bad_inputs_get_clear_errors(elmo):
    with pytest.raises(TypeError, match="got dtype float32"):
        elmo(tf.zeros([1, 2, 50]))
    with pytest.raises(ValueError, match=r"got shape \[1, 2, 49\]"):
        elmo(tf.zeros([1, 2, 49], tf.int32))
    with pytest.raises(TypeError, match=r"tokens\[0\]\[1\] is int"):
        elmo([["a", 1]])
    with pytest.raises(TypeError, match="backbone must be an elmo_tf Backbone"):
        ElmoEmbedding("options.json")
    with pytest.raises(ValueError, match=r"\[batch, time\].*got shape \[2\].*\[tokens\]"):
        elmo(["The", "cat"])


def test_config_round_trip(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0, fine_tune=True,
                                       num_output_representations=2, dtype="mixed_bfloat16")
    restored = assert_serializable(elmo, tf.constant(TOKENS))
    assert isinstance(restored.backbone, ElmoBackbone) and restored.fine_tune
    assert restored.backbone.bilm.compute_dtype == "bfloat16"


def test_keras_model_saves_and_loads_in_a_fresh_process(elmo, tmp_path):
    tokens = keras.Input(shape=(None,), dtype="string", name="tokens")
    logits = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(elmo(tokens)))
    model = keras.Model(tokens, logits)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(tf.constant(TOKENS * 2), np.array([0, 1, 0, 1]), epochs=2, verbose=0)
    path = tmp_path / "classifier.keras"
    model.save(path)
    expected = model(tf.constant(TOKENS)).numpy()
    np.save(tmp_path / "expected.npy", expected)
    code = (
        "import numpy as np, keras, tensorflow as tf, elmo_tf\n"
        f"m = keras.models.load_model({str(path)!r})\n"
        f"got = m(tf.constant({TOKENS!r})).numpy()\n"
        f"print(np.abs(got - np.load({str(tmp_path / 'expected.npy')!r})).max())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout.strip().splitlines()[-1]) == 0.0


def test_mixed_bfloat16_policy(tiny_model):
    _, _, options_file, weight_file = tiny_model
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dtype="mixed_bfloat16",
                                       dropout=0.0)
    assert elmo.backbone.bilm.compute_dtype == "bfloat16"
    assert elmo(tf.constant(TOKENS)).dtype == tf.bfloat16
