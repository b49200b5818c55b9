import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.layers import ScalarMix
from tests import reference
from tests.conftest import assert_serializable


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    layers = rng.standard_normal((2, 3, 5, 4)).astype(np.float32) * 3 + 1
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
    return layers, mask


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_matches_allennlp_formula(do_layer_norm):
    layers, mask = _inputs()
    mix = ScalarMix(3, do_layer_norm=do_layer_norm, initial_scalar_parameters=[0.1, -0.5, 1.0])
    got = mix(layers, mask=mask).numpy()
    expected = reference.scalar_mix(layers.transpose(1, 0, 2, 3).astype(np.float64), mask,
                                    np.array([0.1, -0.5, 1.0]), 1.0, do_layer_norm)
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_gamma_scales_the_mix(do_layer_norm):
    """gamma multiplies the whole mix (fine-tuned away from its initial 1)."""
    layers, mask = _inputs()
    mix = ScalarMix(3, do_layer_norm=do_layer_norm, initial_scalar_parameters=[0.3, 0.0, -0.2])
    mix(layers, mask=mask)
    mix.gamma.assign(np.full(mix.gamma.shape, 2.5, np.float32))
    expected = reference.scalar_mix(layers.transpose(1, 0, 2, 3).astype(np.float64), mask,
                                    np.array([0.3, 0.0, -0.2]), 2.5, do_layer_norm)
    np.testing.assert_allclose(mix(layers, mask=mask), expected, atol=1e-5)


def test_layer_norm_statistics_are_batch_global_and_ignore_padding():
    layers, mask = _inputs()
    mix = ScalarMix(3, do_layer_norm=True)
    changed = layers.copy()
    changed[1, :, 3:] = 1e6  # padding values do not enter the statistics
    np.testing.assert_allclose(mix(changed, mask=mask)[:, :2], mix(layers, mask=mask)[:, :2],
                               atol=1e-5)
    other = layers.copy()
    other[1, :, 0] += 10.0  # but a valid position of row 1 changes row 0's normalisation
    assert np.abs(mix(other, mask=mask)[0] - mix(layers, mask=mask)[0]).max() > 1e-3


def test_l2_penalty_is_bilm_tf_l2_coef_times_sum_of_squares():
    mix = ScalarMix(3, initial_scalar_parameters=[1.0, 2.0, 3.0], l2_coef=0.01)
    mix(_inputs()[0])
    np.testing.assert_allclose(float(sum(mix.losses)), 0.01 * 14.0, rtol=1e-6)


def test_fixed_parameters_are_not_trainable_and_gamma_stays_one():
    mix = ScalarMix(3, initial_scalar_parameters=[0.0, 0.0, 5.0], trainable=False)
    layers, _ = _inputs()
    out = mix(layers).numpy()
    mix.trainable = True  # as a parent model's `trainable = True` would: fixed stays fixed
    assert not mix.trainable_weights
    w = np.exp([0, 0, 5.0]) / np.exp([0, 0, 5.0]).sum()
    np.testing.assert_allclose(out, np.einsum("l,bltd->btd", w, layers), atol=1e-5)


def test_dropout_only_in_training():
    mix = ScalarMix(3, dropout=0.5)
    layers, _ = _inputs()
    np.testing.assert_array_equal(mix(layers, training=False), mix(layers))
    dropped = mix(layers, training=True).numpy()
    assert (dropped == 0).mean() > 0.2


def test_gradients_reach_weights_and_gamma():
    mix = ScalarMix(3, do_layer_norm=True)
    layers, mask = _inputs()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(mix(layers, mask=mask) * np.arange(4, dtype=np.float32))
    grads = tape.gradient(loss, mix.trainable_weights)
    assert len(grads) == 2 and all(np.abs(g).sum() > 0 for g in grads)


def test_mixed_precision_config_round_trip_and_errors():
    mix = ScalarMix(3, dropout=0.1, l2_coef=0.001, dtype="mixed_bfloat16")
    assert mix(tf.ones([1, 3, 2, 4])).dtype == tf.bfloat16
    layers, mask = _inputs()
    restored = assert_serializable(
        ScalarMix(3, do_layer_norm=True, initial_scalar_parameters=[1, 2, 3], trainable=False,
                  l2_coef=0.5, dropout=0.2), layers, mask)
    assert not restored.trainable_weights
    with pytest.raises(ValueError, match="one per layer"):
        ScalarMix(3, initial_scalar_parameters=[1.0])
    with pytest.raises(ValueError, match="dropout"):
        ScalarMix(3, dropout=1.5)


def test_graph_and_xla_match_eager():
    layers, mask = _inputs()
    mix = ScalarMix(3, do_layer_norm=True, initial_scalar_parameters=[0.3, 0.1, -0.2])
    xla = tf.function(lambda x, m: mix(x, mask=m), jit_compile=True)
    np.testing.assert_allclose(xla(layers, mask), mix(layers, mask=mask), atol=1e-5)
