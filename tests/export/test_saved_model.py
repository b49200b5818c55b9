import os
import shutil
import stat
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import kernels

from elmo_tf import ElmoBackbone, ElmoEmbedding, tokens_to_char_ids
from elmo_tf.export import export_saved_model

TOKENS = [["The", "cat", "sat", "."], ["Hello", "", "", ""], ["", "", "", ""]]
LENGTHS = [4, 1, 0]


@pytest.fixture(scope="module")
def exported(tiny_model_files, tmp_path_factory):
    _, _, options_file, weight_file = tiny_model_files
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0, l2_coef=0.01)
    elmo.build((None, None))
    elmo.scalar_mixes[0].scalar_weights.assign([0.5, -1.0, 2.0])  # a mix that is not the mean
    path = export_saved_model(elmo, tmp_path_factory.mktemp("serving") / "elmo")
    return elmo, path


@pytest.fixture(scope="module")
def loaded(exported):
    """The export, loaded once for the tests that only call it."""
    return tf.saved_model.load(exported[1])


def _expected(elmo, tokens):
    """Every output of the export, computed with the in-memory Keras layers (as graphs, like the
    SavedModel's functions: eager and graph execution differ by float32 round-off, ~1e-6)."""
    outputs = elmo.backbone.embed(tokens_to_char_ids(tokens))
    mask = outputs["mask"].numpy()
    grid = outputs["token_embeddings"].numpy()[:, 1:-1]
    elmo_out = tf.function(lambda t: elmo(t, training=False))(tf.constant(tokens)).numpy()
    counts = np.maximum(mask.sum(axis=1, keepdims=True), 1)
    return {"word_emb": grid * mask[..., None], "mask": mask, "elmo": elmo_out,
            "lstm_outputs1": outputs["layers"].numpy()[:, 1],
            "lstm_outputs2": outputs["layers"].numpy()[:, 2],
            "default": (elmo_out * mask[..., None]).sum(axis=1) / counts}


def test_version_directory_and_signatures(exported, loaded):
    _, path = exported
    assert os.path.basename(path) == "1" and os.path.exists(os.path.join(path, "saved_model.pb"))
    assert not [d for d in os.listdir(os.path.dirname(path)) if d != "1"]  # nothing half-written
    assert set(loaded.signatures) == {"serving_default", "tokens", "default"}
    tokens_sig = loaded.signatures["tokens"]
    assert set(tokens_sig.structured_input_signature[1]) == {"tokens", "sequence_len"}
    assert set(tokens_sig.structured_outputs) == {
        "word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default", "mask"}
    assert set(loaded.signatures["default"].structured_input_signature[1]) == {"default"}


def test_fresh_process_without_elmo_tf_matches_the_in_memory_model(exported, tmp_path):
    elmo, path = exported
    code = (
        "import os, sys; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
        "import numpy as np, tensorflow as tf\n"
        f"m = tf.saved_model.load({path!r})\n"
        f"out = m.signatures['tokens'](tokens=tf.constant({TOKENS!r}),\n"
        f"                             sequence_len=tf.constant({LENGTHS!r}))\n"
        f"np.savez({str(tmp_path / 'out.npz')!r}, **{{k: v.numpy() for k, v in out.items()}})\n"
        "assert 'elmo_tf' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    got = np.load(tmp_path / "out.npz")
    for key, value in _expected(elmo, TOKENS).items():
        # Float32 rounding apart on a GPU (1.4e-6 at 2.9 and 1.8e-6 at 0.25 on an H100: the
        # fresh process's kernels differ), equal on a CPU.
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-5, err_msg=key)


def test_default_signature_splits_sentences_on_whitespace(exported, loaded):
    elmo, _ = exported
    out = loaded.signatures["default"](default=tf.constant(["The  cat sat .", "Hello", " "]))
    expected = _expected(elmo, TOKENS)
    for key in ("elmo", "default", "mask"):
        np.testing.assert_allclose(out[key].numpy(), expected[key], atol=1e-6)
    empty = loaded.signatures["default"](default=tf.zeros([0], tf.string))
    assert empty["elmo"].shape == (0, 0, 16) and empty["mask"].shape == (0, 0)


def test_sequence_len_decides_the_padding(exported, loaded):
    elmo, _ = exported
    cut = loaded.signatures["tokens"](tokens=tf.constant([["The", "cat", "sat", "."]]),
                                      sequence_len=tf.constant([2]))
    expected = _expected(elmo, [["The", "cat", "", ""]])
    np.testing.assert_allclose(cut["elmo"].numpy(), expected["elmo"], atol=1e-6)


def test_reusable_savedmodel_api(exported, loaded, tiny_model_files, tmp_path):
    elmo, path = exported
    tokens = tf.constant(TOKENS)
    expected = _expected(elmo, TOKENS)["elmo"]
    np.testing.assert_allclose(loaded(tokens, training=False), expected, atol=1e-6)
    np.testing.assert_allclose(loaded(tokens, training=True), expected, atol=1e-6)  # no dropout
    assert len(loaded.variables) == len(elmo.variables)
    assert {v.name.split("/")[-1] for v in loaded.trainable_variables} == {
        "scalar_weights:0", "gamma:0"}
    # The variables themselves say so: Keras's TFSMLayer trains what hub.KerasLayer does.
    assert {v.name for v in loaded.variables if v.trainable} == {
        v.name for v in loaded.trainable_variables}
    layer = keras.layers.TFSMLayer(path, call_endpoint="serving_default", trainable=True)
    assert len(layer.trainable_weights) == 2
    # (The in-memory model's variables are left as they were by an export: checked in
    # `test_versions_are_never_overwritten_and_failures_leave_nothing`.)
    (penalty,) = loaded.regularization_losses
    np.testing.assert_allclose(penalty(), 0.01 * (0.25 + 1.0 + 4.0), rtol=1e-6)
    # Exported to fine-tune the biLM too, every weight is trainable. (In mixed precision: the
    # export takes and gives float32 everywhere.)
    _, _, options_file, weight_file = tiny_model_files
    whole = ElmoEmbedding.from_allennlp(options_file, weight_file, fine_tune=True, dropout=0.5,
                                        dtype="mixed_bfloat16")
    whole_loaded = tf.saved_model.load(export_saved_model(whole, tmp_path / "whole"))
    assert len(whole_loaded.trainable_variables) == len(whole.weights)
    assert all(v.trainable for v in whole_loaded.variables if "seed" not in v.name)
    assert whole_loaded(tokens, training=False).dtype == tf.float32
    assert np.abs(whole_loaded(tokens, training=True)
                  - whole_loaded(tokens, training=False)).max() > 0
    served = whole_loaded.signatures["tokens"](tokens=tokens, sequence_len=tf.constant(LENGTHS))
    assert {v.dtype for k, v in served.items() if k != "mask"} == {tf.float32}


def test_only_core_ops_with_cpu_kernels(exported):
    _, path = exported
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    (graph,) = [m.graph_def for m in saved.meta_graphs]
    functions = {f.signature.name for f in graph.library.function}
    op_types = {n.op for n in graph.node} | {n.op for f in graph.library.function
                                             for n in f.node_def}
    op_types -= functions
    assert "DecodePaddedRaw" in op_types and "While" in op_types  # the scan sees the model
    # Stock TensorFlow, no tensorflow-text import, has a CPU kernel for every op but the
    # executor's own (NoOp, Assert); nothing is a cuDNN op, nothing must compile with XLA.
    without_cpu_kernel = sorted(
        op for op in op_types if op not in ("NoOp", "Assert")
        and not any(k.device_type == "CPU" for k in kernels.get_registered_kernels_for_op(op).kernel))
    assert without_cpu_kernel == []
    assert not [op for op in op_types if "Cudnn" in op or op.startswith(("TFText", "Xla"))]
    assert not [f for f in graph.library.function if "_XlaMustCompile" in f.attr]


def test_bad_inputs_get_defined_results_or_invalid_argument(loaded):
    serve = loaded.signatures["tokens"]
    empty = serve(tokens=tf.zeros([0, 0], tf.string), sequence_len=tf.zeros([0], tf.int32))
    assert empty["elmo"].shape == (0, 0, 16) and empty["default"].shape == (0, 16)
    padding = serve(tokens=tf.constant([["", ""]]), sequence_len=tf.constant([0]))
    assert not padding["elmo"].numpy().any() and not padding["default"].numpy().any()
    for lengths, match in (([3], "must not exceed max_len"), ([-1], "must not be negative"),
                           ([1, 1], "one length per row")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=match):
            serve(tokens=tf.constant([["a", "b"]]), sequence_len=tf.constant(lengths))
    with pytest.raises(tf.errors.InvalidArgumentError, match="right-padded"):
        serve(tokens=tf.constant([["a", "", "b"]]), sequence_len=tf.constant([3]))
    # Inputs of another rank than the signature declares (which TensorFlow does not check): an
    # error that names the input and the shape accepted, before any of the model runs. (On a
    # GPU the tensor's name carries the copy's node, "tokens/_14": the contract is the input's
    # name, not the node's.)
    for tokens, lengths, name, shape in ((["a", "b"], [1, 1], "tokens", r"\[2\]"),
                                         ([[["a"]]], [1], "tokens", r"\[1,1,1\]"),
                                         ([["a"]], 1, "sequence_len", r"\[\]")):
        expected = r"\[\?\]" if name == "sequence_len" else r"\[\?,\?\]"
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=rf"Shape of tensor {name}(/\S*)? {shape} is not compatible with "
                                 rf"expected shape {expected}"):
            serve(tokens=tf.constant(tokens), sequence_len=tf.constant(lengths))
    default = loaded.signatures["default"]
    for sentences, shape in (("a b", r"\[\]"), ([["a b"]], r"\[1,1\]")):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=rf"Shape of tensor default(/\S*)? {shape} is not compatible with "
                                 r"expected shape \[\?\]"):
            default(default=tf.constant(sentences))
    odd = serve(tokens=tf.constant([["x" * 10_000, b"\xff\xfe bad utf-8"]]),
                sequence_len=tf.constant([2]))
    assert np.isfinite(odd["elmo"].numpy()).all() and odd["mask"].numpy().all()
    many = serve(tokens=tf.constant([["a", "b"]] * 10_000), sequence_len=tf.fill([10_000], 2))
    assert many["elmo"].shape == (10_000, 2, 16)
    np.testing.assert_allclose(many["elmo"][-1], many["elmo"][0], atol=1e-6)


def test_requests_larger_than_a_chunk_keep_every_row_in_place(exported, loaded):
    # More rows than SERVING_ROWS_PER_CHUNK, all different: each must match the in-memory model.
    elmo, _ = exported
    rng = np.random.default_rng(0)
    tokens = [[f"w{rng.integers(1000)}" for _ in range(int(n))] + [""] * (3 - int(n))
              for n in rng.integers(0, 4, size=300)]
    served = loaded.signatures["tokens"](
        tokens=tf.constant(tokens), sequence_len=tf.constant([sum(map(bool, t)) for t in tokens]))
    expected = _expected(elmo, tokens)
    for key in ("elmo", "default", "mask", "word_emb"):
        np.testing.assert_allclose(served[key].numpy(), expected[key], atol=1e-5, err_msg=key)


def test_versions_are_never_overwritten_and_failures_leave_nothing(exported, tiny_model_files,
                                                                   tmp_path, monkeypatch):
    elmo, path = exported
    base = tmp_path / "elmo"
    shutil.copytree(path, base / "1")  # the fixture's version 1, as if exported here
    flags = [v.value.trainable for v in elmo.weights]
    umask = os.umask(0o022)
    try:
        assert export_saved_model(elmo, base).endswith("2")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(base / "2").st_mode) == 0o755  # readable by a server's user
    # The in-memory model's variables are left as they were (the export marks them
    # untrainable while it saves).
    assert [v.value.trainable for v in elmo.weights] == flags
    with pytest.raises(ValueError, match="already exists"):
        export_saved_model(elmo, base, version=2)
    _, _, options_file, weight_file = tiny_model_files
    stateful = ElmoEmbedding(ElmoBackbone.from_allennlp(options_file, weight_file, stateful=True))
    with pytest.raises(ValueError, match="stateful backbone"):
        export_saved_model(stateful, base)
    with pytest.raises(ValueError, match="do_layer_norm"):
        export_saved_model(ElmoEmbedding(elmo.backbone, do_layer_norm=True), base)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tf.saved_model, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_saved_model(elmo, base)
    assert sorted(os.listdir(base)) == ["1", "2"]  # no version 3, no temporary directory
