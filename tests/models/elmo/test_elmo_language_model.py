"""ElmoLanguageModel: the loss against NumPy, sampled vs full softmax, state carried over
stream windows, dropout, serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.elmo.elmo_language_model import ElmoLanguageModel
from elmo_tf.optimizers import SparseAdagrad
from tests.checks import run_task_test
from tests.conftest import assert_serializable

CONFIG = ElmoConfig(lstm_dim=12, projection_dim=6, n_layers=2, char_embedding_dim=4,
                    filters=((1, 4), (2, 6)), cell_clip=3.0, proj_clip=3.0,
                    use_skip_connections=True, n_highway=1)


def _lm(vocabulary_size=40, num_negatives=8192, seed=0, **backbone_kwargs):
    keras.utils.set_random_seed(seed)
    return ElmoLanguageModel(ElmoBackbone(CONFIG, **backbone_kwargs), vocabulary_size,
                             num_negatives=num_negatives)


def _char_ids(rng, batch, time, lengths=None):
    ids = rng.integers(1, 262, size=(batch, time, 50)).astype("int32")
    for row, length in enumerate(lengths or []):
        ids[row, length:] = 0
    return ids


def _nll(logits, targets):
    logits = logits - logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits).sum(-1))
    return log_z - np.take_along_axis(logits, targets[:, None], -1)[:, 0]


def test_loss_is_the_mean_of_both_directions_full_softmax_nll():
    rng = np.random.default_rng(0)
    lm = _lm()
    char_ids = _char_ids(rng, 3, 5, lengths=[5, 3, 4])
    forward = rng.integers(0, 40, size=(3, 5)).astype("int32")
    backward = rng.integers(0, 40, size=(3, 5)).astype("int32")
    forward[0, 4] = forward[1, 2:] = forward[2, 3:] = -1
    backward[:, 0] = backward[1, 3:] = backward[2, 4:] = -1
    y = {"forward_targets": forward, "backward_targets": backward}
    top = lm({"char_ids": char_ids})
    loss = lm.compute_loss(y=y, y_pred=top, training=False)

    top, kernel, bias = (np.asarray(v, np.float64) for v in
                         (top, lm.softmax.kernel, lm.softmax.bias))
    means = []
    for half, targets in ((top[..., :6], forward), (top[..., 6:], backward)):
        valid = targets >= 0
        means.append(_nll(half[valid] @ kernel.T + bias, targets[valid]).mean())
    np.testing.assert_allclose(float(loss), 0.5 * sum(means), rtol=1e-5)
    np.testing.assert_allclose(float(lm.forward_perplexity.result()), np.exp(means[0]), rtol=1e-5)
    np.testing.assert_allclose(float(lm.backward_perplexity.result()), np.exp(means[1]),
                               rtol=1e-5)


def test_training_loss_is_the_sampled_softmax_estimate_of_the_full_one():
    """In training (V > num_negatives) the loss is the sampled softmax's: a draw differs from
    the full softmax's loss, and the mean over many draws comes close to it, closer with more
    negatives (log-uniform candidates, corrected, accidental hits removed)."""
    rng = np.random.default_rng(2)
    vocabulary = 400
    # A trained-looking softmax: frequent (low) ids score higher, as in a Zipfian corpus.
    bias = -np.log(np.arange(1, vocabulary + 1)).astype("float32")
    y_pred = tf.constant(rng.normal(size=(8, 16, 12)), tf.float32)
    ranks = np.arange(1, vocabulary + 1)
    targets = rng.choice(vocabulary, size=(2, 8, 16), p=(1 / ranks) / (1 / ranks).sum())
    targets[:, :, -2:] = -1  # padding: no target
    y = {"forward_targets": targets[0].astype("int32"),
         "backward_targets": targets[1].astype("int32")}

    def losses(num_negatives, draws):
        lm = _lm(vocabulary_size=vocabulary, num_negatives=num_negatives)
        lm.softmax.bias.assign(bias)
        full = float(lm.compute_loss(y=y, y_pred=y_pred, training=False))
        sampled = [float(lm.compute_loss(y=y, y_pred=y_pred, training=True))
                   for _ in range(draws)]
        return full, np.array(sampled)

    full, few = losses(100, 40)
    full_again, many = losses(350, 40)
    assert full == full_again
    assert np.std(few) > 1e-3 and np.all(few != full)  # sampled, and a new draw every step
    assert abs(many.mean() - full) < abs(few.mean() - full) + 0.02
    assert abs(few.mean() - full) / full < 0.15, (few.mean(), full)
    assert abs(many.mean() - full) / full < 0.05, (many.mean(), full)


def test_fit_compiles_with_xla():
    """What Keras does on a GPU by default (`jit_compile=True`), here on the CPU: every op of
    the training and evaluation steps compiles, with the sampled softmax and bilm-tf's
    optimizer (its row-sparse and its dense updates), and training works. (The full softmax,
    compiled, trains as without XLA: `test_xla.py`'s
    `test_the_compiled_step_trains_as_the_plain_one`.)"""
    vocabulary_size = 400
    rng = np.random.default_rng(7)
    lm = _lm(vocabulary_size=vocabulary_size, num_negatives=100, dropout=0.1, stateful=True,
             max_batch_size=4)
    char_ids = _char_ids(rng, 4, 6, lengths=[6, 6, 4, 2])
    targets = np.where(rng.random((4, 6)) < 0.8, 3,
                       rng.integers(0, vocabulary_size, (4, 6))).astype("int32")
    targets[2, 4:] = targets[3, 2:] = -1
    data = tf.data.Dataset.from_tensors(
        ({"char_ids": char_ids, "backward_char_ids": char_ids[:, ::-1].copy()},
         {"forward_targets": targets, "backward_targets": targets})).repeat(15)
    lm.compile(optimizer=SparseAdagrad(0.2, initial_accumulator_value=1.0, global_clipnorm=10.0),
               jit_compile=True)
    before = lm.evaluate(data.take(1), return_dict=True, verbose=0)["loss"]
    history = lm.fit(data, epochs=1, verbose=0, shuffle=False).history
    assert np.isfinite(history["loss"][-1])
    after = lm.evaluate(data.take(1), return_dict=True, verbose=0)["loss"]
    assert after < 0.8 * before, (before, after)


def test_xla_is_chosen_by_default_on_gpus_only(monkeypatch):
    """Pre-training compiles each replica's step with XLA by default on GPUs (measured 2.3x
    faster on an H100), with or without a strategy, not on a CPU (`use_xla("auto")`; the GPU
    is simulated). Without a strategy Keras compiles the whole step too."""
    lm = _lm()
    if not tf.config.list_logical_devices("GPU"):
        lm.compile(optimizer="sgd")
        assert lm.xla is False and lm.jit_compile is False
    gpu = tf.config.LogicalDevice(name="/device:GPU:0", device_type="GPU")
    devices = tf.config.list_logical_devices()
    monkeypatch.setattr(tf.config, "list_logical_devices",
                        lambda device_type=None: devices + [gpu] if device_type is None
                        else [d for d in devices + [gpu] if d.device_type == device_type])
    lm.compile(optimizer="sgd")
    assert lm.xla is True and lm.jit_compile is True
    lm.compile(optimizer="sgd", jit_compile=False)  # Keras's name for it
    assert lm.xla is False and lm.jit_compile is False
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():  # a replica on a CPU
        mirrored = _lm()
        mirrored.compile(optimizer="sgd")
        assert mirrored.xla is False
        mirrored.compile(optimizer="sgd", xla="on")
    assert mirrored.xla is True and mirrored.jit_compile is False  # per replica only


def test_training_samples_only_when_the_vocabulary_is_larger_than_the_negatives():
    assert _lm(vocabulary_size=40, num_negatives=39).softmax.samples
    assert not _lm(vocabulary_size=40, num_negatives=40).softmax.samples


def test_stream_windows_carry_the_state_in_both_directions():
    """Two consecutive windows through a stateful model equal one stateless pass over the whole
    text: forward windows move right, backward windows (their own input) move left."""
    rng = np.random.default_rng(3)
    text = _char_ids(rng, 2, 8)
    stateless = _lm()
    stateful = _lm(stateful=True, max_batch_size=2)
    stateful.set_weights(_copy_weights(stateless, stateful))
    whole = np.asarray(stateless({"char_ids": text}))
    left, right = text[:, :4], text[:, 4:]
    first = np.asarray(stateful({"char_ids": left, "backward_char_ids": right}))
    second = np.asarray(stateful({"char_ids": right, "backward_char_ids": left}))
    np.testing.assert_allclose(first[..., :6], whole[:, :4, :6], atol=1e-6)
    np.testing.assert_allclose(second[..., :6], whole[:, 4:, :6], atol=1e-6)
    np.testing.assert_allclose(first[..., 6:], whole[:, 4:, 6:], atol=1e-6)
    np.testing.assert_allclose(second[..., 6:], whole[:, :4, 6:], atol=1e-6)
    stateful.reset_states()
    again = np.asarray(stateful({"char_ids": left, "backward_char_ids": right}))
    np.testing.assert_allclose(again, first, atol=1e-6)


def test_evaluate_starts_from_zero_state_and_leaves_it_there():
    """A stateful model's `evaluate` is that of a fresh model with the same weights, whatever
    state training or an earlier call left behind, and leaves zero state afterwards."""
    rng = np.random.default_rng(8)
    text = _char_ids(rng, 2, 5)
    targets = rng.integers(0, 40, (2, 5)).astype("int32")
    data = tf.data.Dataset.from_tensors(
        ({"char_ids": text, "backward_char_ids": text[:, ::-1].copy()},
         {"forward_targets": targets, "backward_targets": targets[:, ::-1].copy()}))
    used = _lm(stateful=True, max_batch_size=2)
    used.compile(optimizer="sgd")
    fresh = _lm(stateful=True, max_batch_size=2)
    fresh.compile(optimizer="sgd")
    fresh.set_weights(used.get_weights())
    for _ in range(3):  # state carried from these calls would change the evaluation
        used({"char_ids": text, "backward_char_ids": text})
    expected = fresh.evaluate(data, return_dict=True, verbose=0)
    assert used.evaluate(data, return_dict=True, verbose=0) == pytest.approx(expected, rel=1e-6)
    after = np.asarray(used({"char_ids": text, "backward_char_ids": text}))
    fresh.reset_states()
    np.testing.assert_allclose(
        after, np.asarray(fresh({"char_ids": text, "backward_char_ids": text})), atol=1e-6)


def _copy_weights(source, target):
    by_path = {w.path.split("/", 1)[1]: w for w in source.weights}
    return [by_path[w.path.split("/", 1)[1]].numpy() if w.path.split("/", 1)[1] in by_path
            else np.zeros(w.shape, w.dtype) for w in target.weights]


def test_dropout_only_in_training_and_on_every_lstm_input():
    rng = np.random.default_rng(4)
    lm = _lm(dropout=0.5)
    char_ids = _char_ids(rng, 2, 4)
    inference = [np.asarray(lm({"char_ids": char_ids})) for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    training = np.asarray(lm({"char_ids": char_ids}, training=True))
    assert np.mean(training == 0) > 0.3  # the top layer's dropout
    assert not np.allclose(training[training != 0] * 0.5, inference[0][training != 0], atol=1e-3)


def test_fit_lowers_the_loss_and_gradients_reach_every_weight():
    rng = np.random.default_rng(5)
    lm = _lm(vocabulary_size=12, dropout=0.1)
    char_ids = _char_ids(rng, 4, 6)
    targets = np.where(rng.random((4, 6)) < 0.8, 3, rng.integers(0, 12, (4, 6))).astype("int32")
    y = {"forward_targets": targets, "backward_targets": targets}  # mostly 3: quickly learnt
    with tf.GradientTape() as tape:
        loss = lm.compute_loss(y=y, y_pred=lm({"char_ids": char_ids}, training=True))
    gradients = tape.gradient(loss, lm.trainable_weights)
    assert all(g is not None and float(tf.reduce_sum(tf.abs(tf.convert_to_tensor(g)))) > 0
               for g in gradients), [w.path for w, g in zip(lm.trainable_weights, gradients)
                                     if g is None]
    lm.compile(optimizer=keras.optimizers.Adagrad(0.2, initial_accumulator_value=1.0,
                                                  global_clipnorm=10.0))
    traces = _counting_calls(lm, "train_step", "test_step")
    batch = tf.data.Dataset.from_tensors(({"char_ids": char_ids}, y))
    lm.evaluate(batch, verbose=0)
    assert not lm.optimizer.built  # an evaluation needs no optimizer slots
    history = lm.fit(batch.repeat(100), epochs=1, verbose=0, shuffle=False).history
    assert history["loss"][-1] < float(loss)
    result = lm.evaluate(batch, return_dict=True, verbose=0)
    assert result["loss"] < 0.8 * float(loss)
    # Each step traced once: the optimizer's slots are made before the training step's first
    # trace (`FitWorkarounds`), not in it, which made TensorFlow trace it twice.
    assert traces == {"train_step": 1, "test_step": 1}


def _counting_calls(model, *names):
    """{name: how many times `model.name` was called} from now on (a step method's calls are
    its traces)."""
    counts = dict.fromkeys(names, 0)

    def counting(name, method):
        def call(*args, **kwargs):
            counts[name] += 1
            return method(*args, **kwargs)
        return call

    for name in names:
        setattr(model, name, counting(name, getattr(model, name)))
    return counts


def test_bad_inputs_and_targets_name_what_is_accepted():
    lm = _lm()
    with pytest.raises(ValueError, match="'char_ids'"):
        lm({"chars": np.zeros((1, 2, 50), "int32")})
    with pytest.raises(ValueError, match="forward_targets"):
        lm.compute_loss(y={"targets": np.zeros((1, 2), "int32")},
                        y_pred=lm({"char_ids": np.ones((1, 2, 50), "int32")}))
    with pytest.raises(ValueError, match="vocabulary_size"):
        _lm(vocabulary_size=2)
    with pytest.raises(ValueError, match="num_negatives"):
        _lm(num_negatives=0)


def test_keeps_the_task_contract(tmp_path):
    rng = np.random.default_rng(7)
    ids = _char_ids(rng, 2, 5, lengths=[5, 3])
    targets = {"forward_targets": rng.integers(0, 40, (2, 5)),
               "backward_targets": rng.integers(0, 40, (2, 5))}
    targets["forward_targets"][1, 3:] = targets["backward_targets"][1, 3:] = -1
    run_task_test(_lm(), {"char_ids": ids}, targets, tmp_path)


def test_serialization_round_trip():
    rng = np.random.default_rng(6)
    lm = _lm(dropout=0.1, stateful=True, max_batch_size=4)
    restored = assert_serializable(lm)
    assert restored.backbone.dropout == 0.1 and restored.backbone.stateful
    inputs = {"char_ids": _char_ids(rng, 2, 3)}
    lm.reset_states()
    expected = lm(inputs)
    restored(inputs)
    restored.set_weights(lm.get_weights())
    restored.reset_states()
    np.testing.assert_array_equal(restored(inputs), expected)
