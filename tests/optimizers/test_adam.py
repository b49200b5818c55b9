import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.optimizers import Adam

LR, B1, B2, EPSILON = 2e-3, 0.9, 0.999, 1e-7


def _reference(start, gradients, touched, clip_norm=None):
    """Adam from the formula (Kingma & Ba, with Keras's epsilon outside the square root), in
    float64; each step's gradients dense (repeated rows summed), clipped by their global norm.
    `touched[k]`: per step, the rows of variable k that its gradient names (None: dense); other
    rows keep their weights and moments (lazy Adam)."""
    weights = [w.astype(np.float64) for w in start]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, step in enumerate(gradients, start=1):
        if clip_norm is not None:
            norm = np.sqrt(sum((g ** 2).sum() for g in step))
            step = [g * min(1.0, clip_norm / norm) for g in step]
        rate = LR * np.sqrt(1 - B2 ** t) / (1 - B1 ** t)
        for k, g in enumerate(step):
            rows = slice(None) if touched[k] is None else sorted(set(touched[k][t - 1]))
            m[k][rows] = B1 * m[k][rows] + (1 - B1) * g[rows]
            v[k][rows] = B2 * v[k][rows] + (1 - B2) * g[rows] ** 2
            weights[k][rows] -= rate * m[k][rows] / (np.sqrt(v[k][rows]) + EPSILON)
    return weights


@pytest.mark.parametrize("clip_norm, jit_compile", [(None, False), (0.5, False), (0.5, True)])
def test_updates_match_lazy_adam_with_a_global_clip(clip_norm, jit_compile):
    rng = np.random.default_rng(0)
    # A softmax's kernel and bias (row-sparse gradients), and a dense matrix.
    start = [rng.normal(size=(20, 4)).astype(np.float32), rng.normal(size=20).astype(np.float32),
             rng.normal(size=(3, 5)).astype(np.float32)]
    variables = [keras.Variable(w) for w in start]
    optimizer = Adam(LR, beta_1=B1, beta_2=B2, epsilon=EPSILON, global_clipnorm=clip_norm)
    rows = [[3, 7, 3, 3, 12, 0], [7, 8, 8, 1, 1, 1], [3, 7, 3, 3, 12, 0]]
    steps = [[tf.IndexedSlices(tf.constant(rng.normal(size=(6, 4)) * 20, tf.float32),
                               tf.constant(r), tf.constant([20, 4])),
              tf.IndexedSlices(tf.constant(rng.normal(size=6) * 20, tf.float32),
                               tf.constant(r), tf.constant([20])),
              tf.constant(rng.normal(size=(3, 5)) * 20, tf.float32)] for r in rows]

    @tf.function(jit_compile=jit_compile)
    def apply(grads):
        optimizer.apply(grads, variables)

    for grads in steps:
        apply(grads)
    dense = []
    for grads in steps:
        sparse = []
        for g, shape in zip(grads[:2], ((20, 4), (20,))):
            sparse.append(np.zeros(shape))
            np.add.at(sparse[-1], g.indices.numpy(), g.values.numpy())
        dense.append(sparse + [grads[2].numpy().astype(np.float64)])
    for variable, value in zip(variables, _reference(start, dense, [rows, rows, None],
                                                     clip_norm)):
        np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-6)
    # Rows no gradient touched keep their weights and moments exactly.
    untouched = [r for r in range(20) if r not in {i for step in rows for i in step}]
    np.testing.assert_array_equal(variables[0].numpy()[untouched], start[0][untouched])
    np.testing.assert_array_equal(optimizer._momentums[0].numpy()[untouched], 0.0)


def test_config_round_trip():
    optimizer = Adam(1e-3, global_clipnorm=10.0)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(optimizer))
    assert type(again) is Adam and again.get_config() == optimizer.get_config()
