"""The downstream task models: what they compute (masked pooling, the pair matching features,
padding out of the tagger's loss and metrics), that they learn, clear errors, and `.keras`
files that load in a fresh process with the same predictions."""

import json
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_tf import ElmoBackbone, ElmoConfig, ElmoEmbedding
from elmo_tf.layers.masked_max_pooling import MaskedMaxPooling
from elmo_tf.models.downstream import SentencePairClassifier, SequenceTagger, TextClassifier
from tests import subprocesses
from tests.checks import run_task_test
from tests.conftest import CPU_ONLY_ENV, assert_serializable, keras_sees_a_gpu


def _embedding(seed=0):
    keras.utils.set_random_seed(seed)
    return ElmoEmbedding(ElmoBackbone(ElmoConfig.from_preset("tiny")), dropout=0.0)


def _run(model, texts, **kwargs):
    """The model on raw texts: its preprocessor's features through it (KerasHub's way)."""
    return model(model.preprocessor(texts), **kwargs)


def _compile(model):
    model.compile(optimizer=keras.optimizers.Adam(1e-2), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_the_preprocessors_tokens_and_masked_max_pooling():
    tagger = SequenceTagger(_embedding(), tags=["O", "X"], encoder_units=4)
    tokens = tagger.preprocessor.tokens(tf.constant(["The  cat .", "Hi", ""])).numpy().tolist()
    assert tokens == [[b"The", b"cat", b"."], [b"Hi", b"", b""], [b"", b"", b""]]
    classifier = TextClassifier(_embedding(), labels=["a", "b"], tokenizer="wordpunct",
                                encoder_units=4)
    assert classifier.preprocessor.tokens(tf.constant(["can't"])).numpy().tolist() == \
        [[b"can", b"'", b"t"]]
    column = classifier.preprocessor(tf.constant([["a b"], ["c"]]))["char_ids"]  # [batch, 1]
    assert column.shape[:2] == (2, 2)
    words = TextClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                           word_embedding_dim=3).preprocessor
    assert_serializable(words, tf.constant(["a b c", "d"]))
    assert_serializable(SentencePairClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                                               hidden_dim=4).preprocessor,
                        {"text_a": tf.constant(["a b"]), "text_b": tf.constant(["c"])})
    with pytest.raises(ValueError, match=r"reads the texts \['text_a', 'text_b'\]; got "
                                         r"\['text_a'\]"):
        SentencePairClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                               hidden_dim=4).preprocessor({"text_a": tf.constant(["a"])})
    x = tf.constant(np.random.default_rng(0).normal(size=(3, 4, 2)), tf.float32)
    mask = tf.constant([[True, True, False, False], [True] * 4, [False] * 4])
    big = tf.where(mask[:, :, None], x, 1e9)  # padding that would win a plain max
    pooled = MaskedMaxPooling()(big, mask=mask).numpy()
    np.testing.assert_array_equal(pooled[0], x.numpy()[0, :2].max(0))
    np.testing.assert_array_equal(pooled[1], x.numpy()[1].max(0))
    np.testing.assert_array_equal(pooled[2], [0.0, 0.0])  # no real token
    assert_serializable(MaskedMaxPooling(), x)
    with pytest.raises(ValueError, match=r"one of \['whitespace', 'wordpunct'\] \(core "):
        TextClassifier(_embedding(), labels=["a", "b"], tokenizer="unicode_script")


def test_the_tagger_leaves_padding_out_of_its_loss_and_metrics():
    tagger = _compile(SequenceTagger(_embedding(), tags=["O", "X"], encoder_units=8))
    sentences = tf.constant(["a b c", "d"])
    tags = np.array([[1, 0, 1], [1, 0, 0]])  # the second row's last two are padding
    logits = tagger.predict(sentences, verbose=0)
    assert logits.shape == (2, 3, 2)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    real = [(0, 0), (0, 1), (0, 2), (1, 0)]
    nll = np.mean([-log_p[i, t, tags[i, t]] for i, t in real])
    right = np.mean([logits[i, t].argmax() == tags[i, t] for i, t in real])
    got = tagger.evaluate(sentences, tags, return_dict=True, verbose=0)
    assert got["loss"] == pytest.approx(nll, rel=1e-5)
    assert got["accuracy"] == pytest.approx(right)
    # Tags at padding do not matter at all.
    other = tags.copy()
    other[1, 1:] = 1 - other[1, 1:]
    assert tagger.evaluate(sentences, other, return_dict=True, verbose=0) == got


def test_the_taggers_loss_is_the_mean_over_the_global_batchs_tokens():
    """Split as a strategy splits a batch between replicas (halves of unequal token counts),
    each replica's loss over the global count adds up to the whole batch's mean over its
    tokens, and so do the gradients (the optimizer sums the replicas'): not the mean of
    the halves' means."""
    tagger = SequenceTagger(_embedding(), tags=["O", "X", "Y"], encoder_units=8)
    sentences = tf.constant(["a b c d e", "f", "g h", "i"])
    tags = tf.constant([[1, 0, 2, 1, 0], [2, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    x = tagger.preprocessor(sentences)
    logits = tagger(x).numpy()
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    lengths = [5, 1, 2, 1]
    nll = [-log_p[i, t, tags[i, t]] for i in range(4) for t in range(lengths[i])]

    def loss_and_gradients(rows, counts=None):
        part = {k: tf.gather(v, rows) for k, v in x.items()}
        with tf.GradientTape() as tape:
            loss = tagger.compute_loss(part, tf.gather(tags, rows), tagger(part),
                                       loss_counts=counts)
        return loss, tape.gradient(loss, tagger.trainable_variables)

    whole, whole_gradients = loss_and_gradients([0, 1, 2, 3])
    assert float(whole) == pytest.approx(np.mean(nll), rel=1e-5)
    counts = tagger.global_loss_counts(x, tags)
    assert float(counts["tokens"]) == 9
    (a, a_gradients), (b, b_gradients) = (loss_and_gradients(rows, counts)
                                          for rows in ([0, 1], [2, 3]))
    assert float(a + b) == pytest.approx(float(whole), rel=1e-5)
    for g, ga, gb in zip(whole_gradients, a_gradients, b_gradients):
        np.testing.assert_allclose(ga + gb, g, atol=1e-6)
    halves = (np.mean(nll[:6]) + np.mean(nll[6:])) / 2  # what a mean per replica gave
    assert abs(halves - float(whole)) > 1e-3
    # Tags of another width than the tokens are misaligned: refused.
    with pytest.raises(tf.errors.InvalidArgumentError, match="one per token"):
        tagger.compute_loss(x, tf.pad(tags, [[0, 0], [0, 1]]), tagger(x))
    # The loss is the tagger's own: another one given to compile is refused, not ignored.
    with pytest.raises(ValueError, match="compile with loss='auto'"):
        tagger.compile(loss=keras.losses.SparseCategoricalCrossentropy(ignore_class=0,
                                                                       from_logits=True))


def test_the_pair_classifier_matches_u_v_their_difference_and_product():
    model = SentencePairClassifier(_embedding(), labels=["no", "yes"], encoder_units=4,
                                   hidden_dim=8)
    inputs = {"text_a": tf.constant(["a man sleeps", "x"]),
              "text_b": tf.constant(["a person rests .", "y z"])}
    inner = keras.Model(model.inputs, [model.get_layer("matching").output])
    matched = inner(model.preprocessor(inputs)).numpy()
    width = matched.shape[1] // 4
    a, b = matched[:, :width], matched[:, width:2 * width]
    np.testing.assert_allclose(matched[:, 2 * width:3 * width], np.abs(a - b), atol=1e-6)
    np.testing.assert_allclose(matched[:, 3 * width:], a * b, atol=1e-6)
    assert not np.allclose(a, b)
    assert _run(model, inputs).shape == (2, 2)


def test_empty_texts_get_the_prediction_of_an_empty_sentence():
    """A batch in which no text has a token (Keras's LSTM cannot run zero steps) is one column
    of padding: an empty text gets the same logits alone as beside a real sentence, those of a
    sentence with no token (the head's bias, the pooled vector being zeros)."""
    classifier = TextClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                                word_embedding_dim=3)
    alone = _run(classifier, tf.constant(["", " "])).numpy()
    beside = _run(classifier, tf.constant(["", "a b c"])).numpy()
    np.testing.assert_allclose(alone[0], beside[0], atol=1e-6)
    np.testing.assert_allclose(alone, [classifier.get_layer("logits").bias.numpy()] * 2,
                               atol=1e-6)
    tagger = SequenceTagger(_embedding(), tags=["O", "X"], encoder_units=4)
    assert _run(tagger, tf.constant([""])).shape == (1, 1, 2)
    pair = SentencePairClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                                  hidden_dim=4)
    assert _run(pair, {"text_a": tf.constant([""]), "text_b": tf.constant([""])}).shape == \
        (1, 2)


@pytest.mark.parametrize("task", ["classifier", "pair_regressor", "tagger"])
def test_every_task_keeps_the_task_contract(task, tmp_path):
    models = {
        "classifier": lambda: TextClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                                             word_embedding_dim=3),
        "pair_regressor": lambda: SentencePairClassifier(_embedding(), labels=None,
                                                         encoder_units=4, hidden_dim=4),
        "tagger": lambda: SequenceTagger(_embedding(), tags=["O", "X"], encoder_units=4)}
    model = models[task]()
    # Its weightless preprocessing layers are built from the start, before any call: never
    # called as layers, they would keep the task unbuilt for Keras (run_task_test).
    assert [layer.name for layer in model.preprocessor._flatten_layers()
            if not layer.built] == []
    texts = [("a b c", "d e"), ("f", "g h i")] if task == "pair_regressor" else \
        [("a b c",), ("d",)]
    labels = {"classifier": [0, 1], "pair_regressor": [0.5, 2.0],
              "tagger": [[1, 0, 1], [0]]}[task]
    targets = model.targets(labels)
    if isinstance(targets, tf.RaggedTensor):
        targets = targets.to_tensor(0)
    run_task_test(model, model.preprocessor(model.inputs_for(texts)), targets, tmp_path,
                  loss=model.task_loss())


def test_a_classifier_and_a_regressor_learn():
    texts = tf.constant(["a good film", "good fun", "so good", "good .",
                         "a bad film", "bad fun", "so bad", "bad ."])
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    model = _compile(TextClassifier(_embedding(), labels=["neg", "pos"], encoder_units=8))
    before = model.evaluate(texts, labels, return_dict=True, verbose=0)["loss"]
    model.fit(texts, labels, epochs=30, batch_size=8, verbose=0)
    after = model.evaluate(texts, labels, return_dict=True, verbose=0)
    assert after["accuracy"] == 1.0 and after["loss"] < 0.8 * before
    # Text as NumPy strings or a list goes through the preprocessor as a tensor does.
    expected = model.predict(texts, verbose=0)
    for other in (texts.numpy().astype(str), [t.decode() for t in texts.numpy()]):
        np.testing.assert_allclose(model.predict(other, verbose=0), expected, atol=1e-6)
    regressor = SentencePairClassifier(_embedding(), labels=None, encoder_units=4,
                                       hidden_dim=4)
    assert _run(regressor, {"text_a": texts[:2], "text_b": texts[2:4]}).shape == (2, 1)


def test_clear_errors():
    embedding = _embedding()
    with pytest.raises(ValueError, match="two or more distinct class names"):
        TextClassifier(embedding, labels=["a", "a"])
    with pytest.raises(ValueError, match="labels .the class names. are required"):
        SequenceTagger(embedding, tags=None)
    with pytest.raises(TypeError, match="embedding must be an elmo_tf ElmoEmbedding"):
        TextClassifier(embedding.backbone, labels=["a", "b"])
    with pytest.raises(ValueError, match="encoder_units must be a positive integer"):
        TextClassifier(embedding, labels=["a", "b"], encoder_units=0)
    with pytest.raises(ValueError, match="word_embedding_dim must be an integer >= 0"):
        TextClassifier(embedding, labels=["a", "b"], word_embedding_dim=-1)
    with pytest.raises(ValueError, match="Calling a model directly.*model.preprocessor"):
        TextClassifier(embedding, labels=["a", "b"])(tf.constant(["a b"]))  # KerasHub's


def test_a_classifier_config_from_before_the_word_features_builds_elmo_alone():
    """`.keras` files saved before `word_embedding_dim` existed have no such key."""
    model = TextClassifier(_embedding(), labels=["a", "b"], encoder_units=4,
                           word_embedding_dim=3)
    assert "bag_of_words" in [layer.name for layer in model.layers]
    config = model.get_config()
    del config["word_embedding_dim"]
    old = TextClassifier.from_config(config)
    assert old.word_embedding_dim == 0
    assert "bag_of_words" not in [layer.name for layer in old.layers]


SERVE_AND_LOAD = """
import json, sys
import tensorflow as tf
requests, directory = json.loads(sys.argv[1]), sys.argv[2]
out = {"served": {}, "loaded": {}}
for name, inputs in requests.items():
    serve = tf.saved_model.load(f"{directory}/{name}/1").signatures["serving_default"]
    kwargs = {k: tf.constant(v) for k, v in inputs.items()}
    out["served"][name] = {
        k: (v.numpy().astype(str).tolist() if v.dtype == tf.string else v.numpy().tolist())
        for k, v in serve(**kwargs).items()}
assert not [m for m in sys.modules if m.startswith(("elmo_tf", "tensorflow_text"))]
import keras
import elmo_tf  # registers the classes
for name, inputs in requests.items():
    model = keras.saving.load_model(f"{directory}/{name}.keras")
    x = {k: tf.constant(v) for k, v in inputs.items()}
    out["loaded"][name] = model.predict(x if len(x) > 1 else tf.constant(*inputs.values()),
                                        verbose=0).tolist()
print("OUT" + json.dumps(out))
"""


def _traced_ops(model, inputs):
    return {op.type for op in tf.function(lambda x: model(x, training=False))
            .get_concrete_function(inputs).graph.get_operations()}


def _task_models_read_back_in_a_fresh_process(tmp_path, on_the_gpu_path):
    """Exports the three task models (`on_the_gpu_path()`: a context in which Keras traces
    its GPU code path) and saves them as `.keras` files; a new process without a GPU serves
    the exports before it imports elmo-tf or tensorflow-text, then loads the `.keras` files
    (`import elmo_tf` registers their classes); both compute what the in-memory models do.
    The classifier carries Adam's slots, as a fine-tuned model does: its export holds the
    model's variables and none of the optimizer's (serving reads none). The loaded tagger
    keeps its biLM frozen."""
    import os

    from elmo_tf.export import export_task_model
    from elmo_tf.keras_compat import sublayers

    embedding = _embedding()
    models = {
        "classifier": TextClassifier(embedding, labels=["neg", "pos"], encoder_units=4,
                                     word_embedding_dim=3),
        "regressor": SentencePairClassifier(embedding, labels=None, encoder_units=4,
                                            hidden_dim=4),
        "tagger": SequenceTagger(embedding, tags=["O", "B-X", "I-X"], encoder_units=4),
    }
    requests = {"classifier": {"text": ["a good film", "bad"]},
                "regressor": {"text_a": ["a b", "c"], "text_b": ["d", "e f g"]},
                "tagger": {"tokens": ["a b c", "d"]}}
    classifier = models["classifier"]
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3), loss=classifier.task_loss())
    classifier.optimizer.build(classifier.trainable_variables)
    assert len(classifier.optimizer.variables) > len(classifier.trainable_variables)
    with on_the_gpu_path():
        # Traced here, the in-memory model does take cuDNN; the export must not.
        features = classifier.preprocessor(tf.constant(["a b"]))
        assert "CudnnRNNV3" in _traced_ops(classifier, features)
        for name, model in models.items():
            assert export_task_model(model, tmp_path / name).endswith("1")
    saved = [name for name, _ in tf.train.list_variables(os.path.join(
        tmp_path, "classifier", "1", "variables", "variables")) if name.endswith("VARIABLE_VALUE")]
    assert len(saved) == len(classifier.variables)
    assert not [name for name in saved if "optimizer" in name]
    lstms = [l for m in models.values() for l in sublayers(m) if hasattr(l, "use_cudnn")]
    assert len(lstms) == 6 and all(l.use_cudnn == "auto" for l in lstms)  # training keeps cuDNN
    for name, model in models.items():
        model.save(tmp_path / f"{name}.keras")
    done = subprocesses.run([sys.executable, "-c", SERVE_AND_LOAD, json.dumps(requests),
                             str(tmp_path)], capture_output=True, text=True, seconds=300,
                            what="serving the exports and loading the .keras files in a new "
                                 "process", env={**os.environ, **CPU_ONLY_ENV})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("OUT", 1)[1])
    inputs = {name: {k: tf.constant(v) for k, v in request.items()}
              for name, request in requests.items()}
    got = out["served"]
    logits = _run(models["classifier"], inputs["classifier"]["text"]).numpy()
    np.testing.assert_allclose(got["classifier"]["logits"], logits, rtol=1e-5, atol=1e-6)
    assert got["classifier"]["label"] == [["neg", "pos"][k] for k in logits.argmax(-1)]
    np.testing.assert_allclose(got["regressor"]["score"],
                               _run(models["regressor"], inputs["regressor"]).numpy()[:, 0],
                               rtol=1e-5, atol=1e-6)
    tags = _run(models["tagger"], inputs["tagger"]["tokens"]).numpy().argmax(-1)
    names = ["O", "B-X", "I-X"]
    assert got["tagger"]["tags"] == [[names[k] for k in tags[0]], [names[tags[1, 0]], "", ""]]
    for name, model in models.items():  # the .keras files: the models' own predictions
        x = inputs[name] if len(inputs[name]) > 1 else next(iter(inputs[name].values()))
        np.testing.assert_allclose(out["loaded"][name], model.predict(x, verbose=0),
                                   rtol=1e-5, atol=1e-6, err_msg=name)  # (a GPU's, on a GPU)
    loaded = keras.saving.load_model(tmp_path / "tagger.keras")
    without_embedding = lambda config: {k: v for k, v in config.items() if k != "embedding"}
    assert loaded.tags == ["O", "B-X", "I-X"]
    # The biLM stays frozen in the loaded model (it trained along before: the deserialized
    # backbone's sub-layers kept trainable=True).
    assert [tuple(v.shape) for v in loaded.trainable_variables] == \
        [tuple(v.shape) for v in models["tagger"].trainable_variables]
    assert not any(v.path.startswith(("char_cnn", "bilm/")) for v in loaded.trainable_variables)
    assert without_embedding(loaded.get_config()) == without_embedding(
        models["tagger"].get_config())


def test_task_exports_and_keras_files_read_back_in_a_fresh_process(tmp_path, monkeypatch):
    """As exported on a GPU machine (Keras's GPU code path forced): no cuDNN op in the export,
    which serves raw text without elmo-tf on a CPU-only machine; the `.keras` files load
    there with the same predictions."""
    import contextlib

    @contextlib.contextmanager
    def on_the_gpu_path():
        with monkeypatch.context() as patch:
            keras_sees_a_gpu(patch)
            yield

    _task_models_read_back_in_a_fresh_process(tmp_path, on_the_gpu_path)


@pytest.mark.gpu
def test_on_a_gpu_task_savedmodels_serve_on_a_cpu(tmp_path):
    """Exported and saved as `.keras` files on a real GPU (the in-memory model trains and
    predicts with cuDNN there), served and loaded in a process with CUDA_VISIBLE_DEVICES=""
    and compared with the in-memory model."""
    import contextlib

    if not tf.config.list_logical_devices("GPU"):
        pytest.skip("no GPU visible: this exports on the GPU itself (the CPU test forces "
                    "Keras's GPU code path instead)")
    _task_models_read_back_in_a_fresh_process(tmp_path, contextlib.nullcontext)


def test_the_model_computes_the_same_on_bucket_padded_features_with_xla():
    """The preprocessor's features (char ids; a classifier's word ids; int32, no string op)
    padded with 0 beyond the longest text give, through the model compiled with XLA, its
    logits on the unpadded features; every layer of the model compiles."""
    texts = tf.constant(["a b c", "d", "the cat sat on the mat ."])
    pairs = {"text_a": texts, "text_b": tf.constant(["x", "y y", "z"])}
    for model, x in ((TextClassifier(_embedding(), labels=["x", "y"], encoder_units=8,
                                     word_embedding_dim=4), texts),
                     (SequenceTagger(_embedding(), tags=["O", "X"], encoder_units=8), texts),
                     (SentencePairClassifier(_embedding(), labels=None, encoder_units=8,
                                             hidden_dim=8), pairs)):
        features = model.preprocessor(x)
        assert sorted(features) == sorted(model.preprocessor.feature_names())
        assert all(f.dtype == tf.int32 for f in features.values())
        padded = {k: tf.pad(v, [[0, 0], [0, 9]] + [[0, 0]] * (len(v.shape) - 2))
                  for k, v in features.items()}
        whole = model(features).numpy()
        compiled = tf.function(model, jit_compile=True)(padded).numpy()
        np.testing.assert_allclose(compiled[:, :whole.shape[1]] if whole.ndim == 3 else compiled,
                                   whole, atol=1e-5, err_msg=type(model).__name__)
        assert model.xla_incompatible_layers() == []


def test_the_layers_after_a_frozen_bilm_compute_the_task_on_its_outputs():
    """`FrozenBiLMHead`: given the biLM's outputs (each text's computed alone), each task's
    logits, loss and gradients are the task's own, and in training its dropout draws too
    (from the same seed states: the same layers); what it cannot do is refused: a
    fine-tuned biLM, outputs of another shape."""
    from elmo_tf.models.downstream import FrozenBiLMHead
    from elmo_tf.models.elmo_embedding import GIVEN

    embedding = _embedding()
    pair = {"text_a": tf.constant(["a b c", "d", ""]), "text_b": tf.constant(["x", "y z", "w"])}
    for model, texts, y in (
            (TextClassifier(ElmoEmbedding(embedding.backbone, dropout=0.5), labels=["a", "b"],
                            encoder_units=8, dropout=0.5, word_embedding_dim=4),
             tf.constant(["a b c", "d e", ""]), [1, 0, 1]),
            (SequenceTagger(embedding, tags=["O", "X"], encoder_units=8),
             tf.constant(["a b c", "d e", "f"]), [[1, 0, 1], [0, 1, 0], [1, 0, 0]]),
            (SentencePairClassifier(embedding, labels=["a", "b"], encoder_units=8), pair,
             [0, 1, 1])):
        model.compile()
        head = FrozenBiLMHead(model)
        x, y = model.preprocessor(texts), tf.constant(y)
        given = dict(x)
        for name in head.given_names(model):
            # each text alone, padded back to the batch's width
            for key in GIVEN:
                rows = [model.backbone.embed(x[name][i:i + 1])[key][0] for i in range(3)]
                width = x[name].shape[1] + 2
                given[head.given_key(name, key)] = tf.stack([tf.pad(
                    r, [[0, 0], [0, width - r.shape[1]], [0, 0]] if r.shape.rank == 3 else
                    [[0, width - r.shape[0]]]) for r in rows])
        seeds = [v for v in model.variables if v.name == "seed_generator_state"]

        def from_seed(function):
            for index, state in enumerate(seeds):
                state.assign(np.array([11 + index, 0], dtype=state.dtype))
            return function()

        if model.dropout:  # in training: the same dropout draws from the same seed states
            np.testing.assert_allclose(from_seed(lambda: head(given, training=True)),
                                       from_seed(lambda: model(x, training=True)), atol=1e-6)
            assert not np.allclose(from_seed(lambda: model(x, training=True)),
                                   model(x, training=False))  # dropout drew something
        with tf.GradientTape(persistent=True) as tape:
            logits, head_logits = model(x, training=False), head(given, training=False)
            loss = model.compute_loss(x, y, logits)
            head_loss = head.compute_loss(given, y, head_logits)
        np.testing.assert_allclose(head_logits, logits, atol=1e-6)
        assert float(head_loss) == pytest.approx(float(loss), rel=1e-6)
        for g, h in zip(tape.gradient(loss, model.trainable_variables),
                        tape.gradient(head_loss, model.trainable_variables)):
            np.testing.assert_allclose(tf.convert_to_tensor(h), tf.convert_to_tensor(g),
                                       atol=1e-6)
    # The embedding on its backbone's outputs, and its clear errors.
    outputs = embedding.backbone.embed(x["text_a_char_ids"])
    given = {key: outputs[key] for key in GIVEN}
    np.testing.assert_allclose(embedding(given), embedding(x["text_a_char_ids"]), atol=1e-6)
    np.testing.assert_array_equal(embedding.compute_mask(given),
                                  embedding.compute_mask(x["text_a_char_ids"]))
    with pytest.raises(ValueError, match=r"takes \['layers_with_boundaries', "
                                         r"'mask_with_boundaries'\]; got \['layers'\]"):
        embedding({"layers": outputs["layers"]})
    with pytest.raises(ValueError, match=r"must be \[batch, 3 layers, time \+ 2, 32\]"):
        embedding({**given, "layers_with_boundaries": outputs["layers_with_boundaries"][:, 1:]})
    embedding.fine_tune = True
    with pytest.raises(ValueError, match="biLM trains .fine_tune. or has dropout"):
        FrozenBiLMHead(TextClassifier(embedding, labels=["a", "b"], encoder_units=8))
