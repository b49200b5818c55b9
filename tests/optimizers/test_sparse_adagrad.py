import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.optimizers import SparseAdagrad

LR, INITIAL, EPSILON = 0.2, 1.0, 1e-7


def _reference(start, gradients, clip_norm=None):
    """Adagrad from the formula, in float64: each step's gradients as dense arrays (repeated
    rows of a sparse gradient summed), clipped together by their global norm."""
    weights = [w.astype(np.float64) for w in start]
    accumulators = [np.full_like(w, INITIAL) for w in weights]
    for step in gradients:
        if clip_norm is not None:
            norm = np.sqrt(sum((g ** 2).sum() for g in step))
            step = [g * min(1.0, clip_norm / norm) for g in step]
        for w, a, g in zip(weights, accumulators, step):
            a += g ** 2
            w -= LR * g / np.sqrt(a + EPSILON)
    return weights


def _dense(gradient, shape):
    if not isinstance(gradient, tf.IndexedSlices):
        return gradient.numpy().astype(np.float64)
    dense = np.zeros(shape)
    np.add.at(dense, gradient.indices.numpy(), gradient.values.numpy())
    return dense


def _steps(rng, table, matrix, n=3, scale=1.0):
    """Per step: a sparse gradient of `table` with repeated rows, and a dense one of `matrix`."""
    return [[tf.IndexedSlices(tf.constant(rng.normal(size=(6, table[1])) * scale, tf.float32),
                              tf.constant([3, 7, 3, 3, 12, 0]), tf.constant(table)),
             tf.constant(rng.normal(size=matrix) * scale, tf.float32)] for _ in range(n)]


@pytest.mark.parametrize("clip_norm", [None, 10.0, 0.5])
def test_updates_match_the_adagrad_formula(clip_norm):
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(20, 4)).astype(np.float32),
             rng.normal(size=(3, 5)).astype(np.float32)]
    variables = [keras.Variable(w) for w in start]
    optimizer = SparseAdagrad(LR, initial_accumulator_value=INITIAL, epsilon=EPSILON,
                              global_clipnorm=clip_norm)
    steps = _steps(rng, (20, 4), (3, 5), scale=20.0)  # a norm of ~100: 0.5 and 10 clip

    @tf.function
    def apply(grads):
        optimizer.apply(grads, variables)

    for grads in steps:
        apply(grads)
    expected = _reference(start, [[_dense(g, v.shape) for g, v in zip(grads, variables)]
                                  for grads in steps], clip_norm)
    for variable, value in zip(variables, expected):
        np.testing.assert_allclose(variable.numpy(), value, rtol=2e-5, atol=2e-6)
    # Rows no gradient touched keep their weights and accumulator exactly.
    untouched = [r for r in range(20) if r not in (0, 3, 7, 12)]
    np.testing.assert_array_equal(variables[0].numpy()[untouched], start[0][untouched])
    np.testing.assert_array_equal(optimizer._accumulators[0].numpy()[untouched], INITIAL)
    assert int(optimizer.iterations.numpy()) == len(steps)


def test_sparse_update_touches_only_the_rows_in_the_graph():
    table = keras.Variable(np.zeros((1000, 8), np.float32))
    optimizer = SparseAdagrad(LR, global_clipnorm=1.0)
    optimizer.build([table])
    grad = tf.IndexedSlices(tf.ones([2, 8]), tf.constant([1, 5]), tf.constant([1000, 8]))
    graph = tf.function(lambda g: optimizer.apply([g], [table])).get_concrete_function(
        grad).graph
    ops = {node.type for node in graph.get_operations()}
    assert {"ResourceScatterAdd", "ResourceScatterSub"} <= ops
    assert "AssignSubVariableOp" not in ops  # no dense update of the table


def test_same_updates_as_keras_adagrad_without_sparse_gradients_or_global_clip():
    rng = np.random.default_rng(1)
    start = rng.normal(size=(3, 5)).astype(np.float32)
    grads = [tf.constant(rng.normal(size=(3, 5)), tf.float32) for _ in range(3)]
    results = []
    for optimizer in (SparseAdagrad(LR, clipnorm=0.3), keras.optimizers.Adagrad(LR, clipnorm=0.3)):
        variable = keras.Variable(start)
        for grad in grads:
            optimizer.apply([grad], [variable])
        results.append(variable.numpy())
    np.testing.assert_array_equal(results[0], results[1])


def test_non_finite_gradients_make_nan_weights():
    variable = keras.Variable(np.ones((2, 2), np.float32))
    SparseAdagrad(LR, global_clipnorm=1.0).apply([tf.constant([[np.inf, 0], [0, 0]])],
                                                  [variable])
    assert np.isnan(variable.numpy()).all()


def test_config_round_trip():
    optimizer = SparseAdagrad(0.3, initial_accumulator_value=0.5, epsilon=1e-6,
                              global_clipnorm=7.0)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(optimizer))
    assert type(restored) is SparseAdagrad
    assert restored.get_config() == optimizer.get_config()


def test_an_empty_sparse_gradient_changes_nothing():
    variable = keras.Variable(np.ones((5, 3), np.float32))
    empty = tf.IndexedSlices(tf.zeros([0, 3]), tf.zeros([0], tf.int32), tf.constant([5, 3]))
    optimizer = SparseAdagrad(LR, initial_accumulator_value=INITIAL, global_clipnorm=1.0)
    optimizer.apply([empty], [variable])
    np.testing.assert_array_equal(variable.numpy(), 1.0)
    np.testing.assert_array_equal(optimizer._accumulators[0].numpy(), INITIAL)
