import json
import subprocess
import sys

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_tf
from elmo_tf import ElmoBackbone, ElmoConfig, tokens_to_char_ids
from elmo_tf.ops.chunking import compute_device_type
from tests import reference
from tests.checks import SENTENCES, run_backbone_test

def _fixture_batches(bilm_tf_dir):
    sentences = json.loads((bilm_tf_dir / "lm_embeddings_sentences.json").read_text())
    for i in range(10):
        tokens = [sentences[k][i].split() for k in range(3)]
        expected = []
        for k in range(3):
            with h5py.File(bilm_tf_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
                top = f[str(i)][...]
            expected.append(np.concatenate([top[0], top[1]], axis=-1))
        yield tokens, expected


@pytest.mark.parametrize("method", ["__call__", "embed"])  # embed: XLA where a GPU is
def test_stateful_matches_bilm_tf_on_all_ten_batches(bilm_tf_dir, method):
    backbone = ElmoBackbone.from_allennlp(bilm_tf_dir / "options.json",
                                          bilm_tf_dir / "lm_weights.hdf5", stateful=True)
    run = getattr(backbone, method)
    worst = 0.0
    for i, (tokens, expected) in enumerate(_fixture_batches(bilm_tf_dir)):
        layers = run(tokens_to_char_ids(tokens))["layers"].numpy()
        for k in range(3):
            worst = max(worst, np.abs(layers[k, 2, :len(tokens[k])] - expected[k]).max())
    assert worst <= 1e-6, worst  # the README's figure


def test_stateless_matches_bilm_tf_first_batch_and_never_carries_state(bilm_tf_dir):
    backbone = ElmoBackbone.from_allennlp(bilm_tf_dir / "options.json",
                                          bilm_tf_dir / "lm_weights.hdf5")
    tokens, expected = next(_fixture_batches(bilm_tf_dir))
    for _ in range(2):  # the second call must not see state from the first
        layers = backbone(tokens_to_char_ids(tokens))["layers"].numpy()
        for k in range(3):
            np.testing.assert_allclose(layers[k, 2, :len(tokens[k])], expected[k], atol=1e-5)


def test_reset_states_restarts_the_stateful_stream(bilm_tf_dir):
    backbone = ElmoBackbone.from_allennlp(bilm_tf_dir / "options.json",
                                          bilm_tf_dir / "lm_weights.hdf5", stateful=True)
    tokens, expected = next(_fixture_batches(bilm_tf_dir))
    ids = tokens_to_char_ids(tokens)
    first = backbone(ids)["layers"].numpy()
    second = backbone(ids)["layers"].numpy()
    assert np.abs(first - second).max() > 1e-3  # state carried
    backbone.reset_states()
    np.testing.assert_array_equal(backbone(ids)["layers"].numpy(), first)


def test_matches_numpy_reference_with_clipping_and_padding(tiny_model):
    options, weights, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file)
    outputs = backbone(tokens_to_char_ids(SENTENCES))
    layers, mask = outputs["layers"].numpy(), outputs["mask"].numpy()
    assert layers.shape == (4, 3, 7, 16) and layers.dtype == np.float32
    np.testing.assert_array_equal(mask.sum(axis=1), [len(s) for s in SENTENCES])
    for row, tokens in enumerate(SENTENCES):
        expected, _ = reference.bilm(tokens, weights, options)
        np.testing.assert_allclose(layers[row, :, :len(tokens)], expected, atol=2e-5, rtol=1e-5)
        assert not layers[row, :, len(tokens):].any()  # zeros at padding, layer 0 included


@pytest.mark.parametrize("clip", ["cell_clip", "proj_clip"])
def test_reference_model_exercises_each_clip(tiny_model, clip):
    options, weights, _, _ = tiny_model
    unclipped = json.loads(json.dumps(options))
    del unclipped["lstm"][clip]
    clipped, _ = reference.bilm(SENTENCES[0], weights, options)
    free, _ = reference.bilm(SENTENCES[0], weights, unclipped)
    assert np.abs(clipped - free).max() > 1e-2  # far above the 2e-5 the tests compare at


def test_stateful_matches_reference_state_carrying(tiny_model):
    options, weights, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file, stateful=True,
                                          max_batch_size=3)
    # The 1-row batch keeps row 1's state, which the next 2-row batch continues from.
    stream = [[["a", "b", "c"], ["d"]], [["e", "f"], ["g", "h", "i", "j"]], [["k"]],
              [["l", "m"], ["n"]]]
    states = [None, None]
    for batch in stream:
        layers = backbone(tokens_to_char_ids(batch))["layers"].numpy()
        for row, tokens in enumerate(batch):
            expected, states[row] = reference.bilm(tokens, weights, options, states[row])
            np.testing.assert_allclose(layers[row, :, :len(tokens)], expected, atol=2e-5)


def test_stateful_rejects_batches_larger_than_max_batch_size(tiny_model):
    _, _, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file, stateful=True,
                                          max_batch_size=2)
    ids = tokens_to_char_ids([["a"], ["b"], ["c"]])
    with pytest.raises(ValueError, match=r"max_batch_size=2 rows; the batch is larger \(3\)"):
        backbone(ids)  # the batch size is known while tracing
    with pytest.raises(ValueError, match=r"max_batch_size=2 rows; the batch is larger \(3\)"):
        backbone.embed(ids)  # checked before the graph runs (XLA drops run-time checks)


def test_keeps_the_backbone_contract(tiny_model, tmp_path):
    _, _, options_file, weight_file = tiny_model
    run_backbone_test(lambda **kwargs: ElmoBackbone.from_allennlp(options_file, weight_file,
                                                                  **kwargs), tmp_path)


def test_embed_traces_once_for_every_shape(tiny_model):
    _, _, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file)
    backbone.embed(tokens_to_char_ids(SENTENCES))
    backbone.embed(tokens_to_char_ids([["a"] * 9]))
    function = backbone._embed.functions[compute_device_type()]
    assert function.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("stateful", [False, True])
def test_embed_on_a_gpu_compiles_padded_shape_buckets_with_the_same_outputs(
        tiny_model, monkeypatch, stateful):
    """On a GPU `embed` runs an XLA graph on inputs padded to shape buckets; the outputs are
    those of the plain graph (the GPU is simulated: the CPU compiles XLA too)."""
    from elmo_tf.models import backbone as contract

    _, _, options_file, weight_file = tiny_model
    plain = ElmoBackbone.from_allennlp(options_file, weight_file, stateful=stateful,
                                       max_batch_size=3)
    gpu = ElmoBackbone.from_allennlp(options_file, weight_file, stateful=stateful,
                                     max_batch_size=3)
    monkeypatch.setattr(contract, "compute_device_type", lambda: "GPU")
    batches = [SENTENCES[:3], [s[:2] for s in SENTENCES[1:3]], [SENTENCES[0] + ["x"] * 3]]
    for tokens in batches:  # 3 x 9 (-> 4 x 10 stateless), 2 x 2, 1 x 10
        ids = tokens_to_char_ids(tokens)
        expected, got = plain.embed(ids), gpu.embed(ids)
        assert set(got) == set(expected)
        for name in expected:
            assert got[name].shape == expected[name].shape, name
            np.testing.assert_allclose(got[name], expected[name], atol=1e-5, err_msg=name)
    assert list(gpu._embed.functions) == ["GPU"]
    assert gpu._embed.functions["GPU"].experimental_get_tracing_count() == 1


def test_outputs_are_float32_under_a_global_mixed_policy(tiny_model):
    _, _, options_file, weight_file = tiny_model
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        backbone = ElmoBackbone.from_allennlp(options_file, weight_file)
        outputs = backbone(tokens_to_char_ids(SENTENCES))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert backbone.bilm.compute_dtype == "bfloat16"
    assert {outputs[k].dtype for k in ("layers", "layers_with_boundaries", "token_embeddings")} == {
        tf.float32}


def test_mixed_precision_keeps_the_cell_state_in_float32_and_survives_saving(tiny_model):
    _, _, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file, dtype="mixed_bfloat16")
    assert backbone.bilm.forward_layers[0].bias.dtype == "float32"
    clone = ElmoBackbone.from_config(backbone.get_config())
    assert clone.bilm.compute_dtype == "bfloat16"
    assert clone.token_encoder.char_cnn.compute_dtype == "bfloat16"


def test_a_stateful_backbone_keeps_its_state_settings_through_its_keras_file(tiny_model,
                                                                            tmp_path):
    _, _, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file, stateful=True,
                                          max_batch_size=4)
    clone = ElmoBackbone.from_config(backbone.get_config())
    assert clone.config == backbone.config and clone.stateful and clone.max_batch_size == 4
    path = tmp_path / "backbone.keras"
    backbone.reset_states()
    backbone.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.stateful and loaded.max_batch_size == 4
    ids = tokens_to_char_ids(SENTENCES)
    np.testing.assert_array_equal(loaded(ids)["layers"], backbone(ids)["layers"])


def test_random_init_is_reproducible_with_a_seed():
    config = ElmoConfig(lstm_dim=8, projection_dim=4, n_layers=1, char_embedding_dim=2,
                        filters=((1, 2),))
    keras.utils.set_random_seed(7)
    a = ElmoBackbone(config)
    keras.utils.set_random_seed(7)
    b = ElmoBackbone(config)
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(va, vb)


def _counted_parameters(c):
    """Parameters from the spec's weight table (§3), counted from the config alone."""
    n = c.num_filters
    count = 261 * c.char_embedding_dim + sum(w * c.char_embedding_dim * f + f for w, f in c.filters)
    count += c.n_highway * 2 * (n * n + n) + n * c.projection_dim + c.projection_dim
    return count + 2 * c.n_layers * (2 * c.projection_dim * 4 * c.lstm_dim + 4 * c.lstm_dim
                                     + c.lstm_dim * c.projection_dim)


@pytest.mark.parametrize("name, millions", [("small", 13.6), ("medium", 28.0), ("original", 93.6)])
def test_presets_have_the_released_parameter_counts(name, millions):
    assert round(_counted_parameters(ElmoConfig.from_preset(name)) / 1e6, 1) == millions


def test_small_preset_builds_exactly_the_released_weights():
    config = ElmoConfig.from_preset("small")
    backbone = ElmoBackbone(config)
    assert backbone.count_params() == _counted_parameters(config)
    assert not backbone.non_trainable_weights


def test_loads_in_a_fresh_process_from_released_files(tiny_model):
    _, _, options_file, weight_file = tiny_model
    code = (f"import elmo_tf; b = elmo_tf.ElmoBackbone.from_allennlp({str(options_file)!r}, "
            f"{str(weight_file)!r}); print(b(elmo_tf.tokens_to_char_ids([['a']]))['layers'].shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(1, 3, 1, 16)"
    assert elmo_tf.__version__


@pytest.mark.gpu
def test_on_a_gpu_embed_compiles_with_xla_and_matches_the_cpu(tiny_model):
    if not tf.config.list_logical_devices("GPU"):
        pytest.skip("no GPU visible: this checks the GPU path (XLA, shape buckets, the GPU's "
                    "char-CNN chunks) on the device itself")
    from elmo_tf.ops.chunking import compute_device_type

    _, _, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file)
    ids = tokens_to_char_ids(SENTENCES)
    assert compute_device_type() == "GPU"
    on_gpu = backbone.embed(ids)
    assert list(backbone._embed.functions) == ["GPU"]
    with tf.device("/CPU:0"):
        assert compute_device_type() == "CPU"
        on_cpu = backbone.embed(ids)
    for name in on_cpu:
        np.testing.assert_allclose(on_gpu[name], on_cpu[name], atol=1e-5, err_msg=name)
