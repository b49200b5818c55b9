"""Shared checks in the style of KerasHub's `run_backbone_test` / `run_task_test`: what every
backbone and every task must do, run on each of them (ELMo's and Masked ELMo's backbones; the
pre-training and downstream tasks)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import ElmoEmbedding, tokens_to_char_ids

SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."],
             ["Ünïcödé", "東京", "x" * 47 + "北", "<S>", "</S>"],
             [],
             ["A"]]


def run_backbone_test(make_backbone, tmp_path):
    """The `Backbone` contract, on the backbones `make_backbone(**kwargs)` builds (with the same
    weights every time; `dtype` among the kwargs): its outputs (shapes, dtypes, zeros at
    padding, the mask), statelessness, empty inputs, clear errors for bad char ids, `embed`
    and XLA equal to the eager call, a training step that compiles with XLA, the dtype policy,
    the config round trip and the `.keras` file, and the mask reaching `ElmoEmbedding`. Any
    family's: the char ids are the backbone's `max_characters_per_token` wide."""
    backbone = make_backbone()
    chars = backbone.max_characters_per_token

    def char_ids(sentences):
        return tokens_to_char_ids(sentences, chars)

    ids = char_ids(SENTENCES)
    out = backbone(ids)
    batch, time = 4, 7
    layers, width = backbone.num_layers, backbone.output_dim
    expected = {"layers": (batch, layers, time, width), "mask": (batch, time),
                "layers_with_boundaries": (batch, layers, time + 2, width),
                "mask_with_boundaries": (batch, time + 2),
                "token_embeddings": (batch, time + 2, backbone.token_dim)}
    assert {k: tuple(v.shape) for k, v in out.items()} == expected
    assert {k: v.dtype for k, v in out.items()} == {
        k: tf.bool if k.startswith("mask") else tf.float32 for k in expected}
    mask = np.array([[t < len(s) for t in range(time)] for s in SENTENCES])
    np.testing.assert_array_equal(out["mask"], mask)
    assert not out["layers"].numpy()[~mask[:, None, :].repeat(layers, 1)].any()  # padding: 0

    # Stateless: a sentence gets the same vectors whatever else is in its batch.
    alone = backbone(char_ids([SENTENCES[0]]))["layers"].numpy()[0]
    batched = backbone(char_ids(SENTENCES[::-1]))["layers"].numpy()[3]
    np.testing.assert_allclose(batched, alone, atol=1e-5)  # matmul blocking depends on batch

    # Empty batches and sentences.
    assert backbone(char_ids([]))["layers"].shape == (0, layers, 0, width)
    assert backbone(char_ids([[], []]))["mask"].shape == (2, 0)
    assert backbone.embed(tf.zeros([0, 4, chars], tf.int32))["layers"].shape == (
        0, layers, 4, width)

    # Bad char ids: clear errors, the same through `embed`; int64 ids are fine.
    for bad, error, match in (
            (tf.zeros([2, 3], tf.int32), ValueError,
             rf"\[batch, time, {chars}\]; got shape \[2, 3\]"),
            (tf.zeros([2, 3, chars + 3], tf.int32), ValueError,
             rf"got shape \[2, 3, {chars + 3}\]"),
            (tf.zeros([2, 3, chars], tf.float32), TypeError, "got dtype float32"),
            (tf.constant([["a", "b"]]), TypeError, "got dtype string.*tokens_to_char_ids"),
            (np.full([1, 2, chars], 300), ValueError,
             r"ids in \[0, 261\].*got ids from 300 to 300")):
        with pytest.raises(error, match=match):
            backbone(bad)
    with pytest.raises(ValueError, match="got ids from -5 to -5"):
        backbone.embed(np.full([1, 2, chars], -5))
    with pytest.raises(tf.errors.InvalidArgumentError, match="right-padded"):
        backbone(char_ids([["a", "", "b"]]))
    with pytest.raises(ValueError, match="right-padded: row 1 has padding"):
        backbone.embed(char_ids([["a", "b"], ["", "b"]]))
    np.testing.assert_array_equal(backbone(tf.cast(ids, tf.int64))["layers"], out["layers"])

    # `embed` (one cached graph for every shape) and XLA give the eager outputs.
    for name, value in backbone.embed(ids).items():
        np.testing.assert_allclose(value, out[name], atol=1e-5, err_msg=name)
    xla = tf.function(lambda x: backbone(x)["layers"], jit_compile=True)
    np.testing.assert_allclose(xla(ids), out["layers"], atol=1e-5)

    # A training step's gradient compiles with XLA (Keras's default on a GPU).
    def grads(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(backbone(x, training=True)["layers"] ** 2)
        return tape.gradient(loss, backbone.trainable_weights)

    for a, b in zip(tf.function(grads, jit_compile=True)(ids), grads(ids)):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                                   rtol=1e-4, atol=1e-3)

    # The dtype policy: bfloat16 compute, float32 outputs, close to float32; kept by the
    # config and the .keras file.
    mixed = make_backbone(dtype="mixed_bfloat16")
    mixed_out = mixed(ids)
    assert {v.dtype for k, v in mixed_out.items() if not k.startswith("mask")} == {tf.float32}
    assert 0 < np.abs(mixed_out["layers"] - out["layers"]).max() < 0.25  # 8 mantissa bits

    # The config round trip and the .keras file (the policy kept).
    config = mixed.get_config()
    assert json.loads(json.dumps(config)) == config
    clone = type(mixed).from_config(config)
    assert clone.get_config() == config
    mixed.save(tmp_path / "backbone.keras")
    loaded = keras.models.load_model(tmp_path / "backbone.keras")
    assert type(loaded) is type(mixed) and loaded.get_config() == config
    np.testing.assert_array_equal(loaded(ids)["layers"], mixed_out["layers"])

    # The mask reaches a downstream model through ElmoEmbedding.
    embedding = ElmoEmbedding(backbone, dropout=0.0)
    np.testing.assert_array_equal(embedding.compute_mask(SENTENCES[:2]), mask[:2])


def run_task_test(model, inputs, targets, tmp_path, loss=None):
    """What every task must do (`model`: built; `inputs`/`targets`: one training batch): float32
    outputs; the config round trip and the `.keras` file give the same outputs; a training
    step changes its trainable weights and gives a finite loss; `predict` on the inputs."""
    expected = model(inputs, training=False)
    for value in tf.nest.flatten(expected):
        assert value.dtype == tf.float32

    config = model.get_config()
    clone = type(model).from_config(config)
    clone(inputs)
    clone.set_weights(model.get_weights())
    for got, want in zip(tf.nest.flatten(clone(inputs, training=False)), tf.nest.flatten(expected)):
        np.testing.assert_allclose(got, want, atol=1e-6)
    model.save(tmp_path / "task.keras")
    loaded = keras.models.load_model(tmp_path / "task.keras")
    assert type(loaded) is type(model)
    for got, want in zip(tf.nest.flatten(loaded(inputs, training=False)),
                         tf.nest.flatten(expected)):
        np.testing.assert_allclose(got, want, atol=1e-6)

    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)
    before = [w.numpy().copy() for w in model.trainable_weights]
    logs = model.train_on_batch(inputs, targets, return_dict=True)
    assert np.isfinite(logs["loss"])
    # Every layer built, its weightless preprocessing layers included: while any is unbuilt,
    # Keras traces the whole model again before every `fit`, `evaluate` and `train_on_batch`.
    assert [layer.name for layer in model._flatten_layers() if not layer.built] == []
    assert any(np.abs(b - w.numpy()).max() > 0 for b, w in zip(before, model.trainable_weights))
