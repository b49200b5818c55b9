"""`PhiloxDropout`: Keras's `Dropout` without XLA, bit for bit; under XLA a dropout of its rate
(the Philox generator named, which XLA runs fast on CPUs)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers import PhiloxDropout
from tests.conftest import assert_serializable


def test_without_xla_the_same_masks_as_keras_dropout_from_the_same_seed():
    x = tf.ones([4, 6, 8])
    for rate, noise_shape in ((0.5, None), (0.2, (None, 1, 8))):
        ours = PhiloxDropout(rate, noise_shape=noise_shape, seed=3)
        keras_ = keras.layers.Dropout(rate, noise_shape=noise_shape, seed=3)
        for _ in range(3):  # each call draws anew, from the same seed generator state
            np.testing.assert_array_equal(ours(x, training=True), keras_(x, training=True))
        np.testing.assert_array_equal(ours(x), x)  # not training: the inputs
    assert not PhiloxDropout(1.0)(x, training=True).numpy().any()


@pytest.mark.parametrize("rate", [0.25, 0.5])
def test_under_xla_it_drops_its_rate_and_scales_the_rest(rate):
    drop = PhiloxDropout(rate, seed=1)
    x = tf.ones([64, 50, 32])
    compiled = tf.function(lambda x: drop(x, training=True), jit_compile=True)
    first, second = compiled(x).numpy(), compiled(x).numpy()
    for out in (first, second):
        kept = out != 0
        assert abs(1 - kept.mean() - rate) < 0.01
        np.testing.assert_allclose(out[kept], 1 / (1 - rate), rtol=1e-6)
    assert (first != second).any()  # a new mask at every call


def test_config_and_dtype_policy():
    drop = PhiloxDropout(0.3, noise_shape=(None, 1), seed=5, dtype="bfloat16", name="d")
    assert_serializable(drop, tf.ones([2, 3]))
    assert drop(tf.ones([2, 3]), training=True).dtype == tf.bfloat16


def test_it_draws_with_philox_and_the_mix_and_the_heads_use_it():
    # Named, the algorithm is a constant of the graph (TensorFlow's default looks it up at
    # run time: StatelessRandomGetKeyCounter), so XLA does not pick its slow one on CPUs.
    drop = PhiloxDropout(0.5, seed=1)
    graph = tf.function(lambda x: drop(x, training=True)).get_concrete_function(
        tf.TensorSpec([2, 3])).graph
    types = {op.type for op in graph.get_operations()}
    assert "StatelessRandomGetKeyCounter" not in types
    assert any(t.startswith("StatelessRandomUniform") for t in types), types
    from elmo_tf import ElmoBackbone, ElmoConfig, ElmoEmbedding
    from elmo_tf.layers import ScalarMix
    from elmo_tf.models.downstream import SentencePairClassifier, SequenceTagger, TextClassifier

    assert isinstance(ScalarMix(3, dropout=0.5).dropout_layer, PhiloxDropout)
    embedding = ElmoEmbedding(ElmoBackbone(ElmoConfig.from_preset("tiny")))
    for model, names in (
            (TextClassifier(embedding, labels=["a", "b"], encoder_units=2), ["dropout"]),
            (SequenceTagger(embedding, tags=["a", "b"], encoder_units=2), ["dropout"]),
            (SentencePairClassifier(embedding, labels=["a", "b"], encoder_units=2,
                                    hidden_dim=2), ["match_dropout", "hidden_dropout"])):
        assert all(isinstance(model.get_layer(name), PhiloxDropout) for name in names)


def test_edge_cases_keras_dropout_has():
    x = tf.ones([2, 3, 4])
    assert PhiloxDropout(0.0)(x, training=True) is x  # no seed generator: the inputs
    inputs = keras.Input((None, 4))
    drop = PhiloxDropout(0.5, noise_shape=(None, 1, None), seed=2)
    model = keras.Model(inputs, drop(inputs, training=True))
    out = model(x).numpy()
    np.testing.assert_array_equal(out[:, 0], out[:, 2])  # the noise broadcast over time
    masked = keras.layers.Masking()(x)
    assert drop.compute_mask(masked, masked._keras_mask) is masked._keras_mask
