"""TF Serving's contract, checked without the server (it cannot be installed here; see the README).

The SignatureDefs are read from saved_model.pb, `saved_model_cli` (TF1-session loading, close to
TF Serving's) runs a signature, gRPC requests are built with tensorflow-serving-api's protos, and
the REST bodies of `/v1/models/elmo:predict` (row and columnar formats) are converted to tensors
and back with TF Serving's JSON rules, by `rest_predict` below: a stand-in, not TF Serving.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from elmo_tf import ElmoEmbedding
from elmo_tf.export import export_saved_model

predict_pb2 = pytest.importorskip("tensorflow_serving.apis.predict_pb2")

OUTPUTS = {"word_emb": (types_pb2.DT_FLOAT, [-1, -1, 8]), "elmo": (types_pb2.DT_FLOAT, [-1, -1, 16]),
           "lstm_outputs1": (types_pb2.DT_FLOAT, [-1, -1, 16]),
           "lstm_outputs2": (types_pb2.DT_FLOAT, [-1, -1, 16]),
           "default": (types_pb2.DT_FLOAT, [-1, 16]), "mask": (types_pb2.DT_BOOL, [-1, -1])}


@pytest.fixture(scope="module")
def export_dir(tiny_model_files, tmp_path_factory):
    _, _, options_file, weight_file = tiny_model_files
    elmo = ElmoEmbedding.from_allennlp(options_file, weight_file, dropout=0.0)
    return export_saved_model(elmo, tmp_path_factory.mktemp("serving") / "elmo")


@pytest.fixture(scope="module")
def signature_defs(export_dir):
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    (meta_graph,) = saved.meta_graphs
    assert list(meta_graph.meta_info_def.tags) == ["serve"]
    return meta_graph.signature_def


def _shape(tensor_info):
    return [d.size for d in tensor_info.tensor_shape.dim]


def test_signature_defs_are_predict_signatures_with_hub_elmo_names(signature_defs):
    expected_inputs = {"tokens": {"tokens": (types_pb2.DT_STRING, [-1, -1]),
                                  "sequence_len": (types_pb2.DT_INT32, [-1])},
                       "default": {"default": (types_pb2.DT_STRING, [-1])}}
    expected_inputs["serving_default"] = expected_inputs["tokens"]
    for name, inputs in expected_inputs.items():
        signature = signature_defs[name]
        assert signature.method_name == "tensorflow/serving/predict"
        assert {k: (v.dtype, _shape(v)) for k, v in signature.inputs.items()} == inputs
        assert {k: (v.dtype, _shape(v)) for k, v in signature.outputs.items()} == OUTPUTS


def test_saved_model_cli_shows_and_runs_the_export(export_dir, tmp_path):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    if not os.path.exists(cli):  # pip installs it beside Python; a PYTHONPATH set-up has none
        pytest.skip(f"no saved_model_cli beside {sys.executable}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    shown = subprocess.run([cli, "show", "--dir", export_dir, "--all"], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert "signature_def['tokens']" in shown and "tensorflow/serving/predict" in shown
    subprocess.run([cli, "run", "--dir", export_dir, "--tag_set", "serve", "--signature_def",
                    "tokens", "--input_exprs",
                    'tokens=[["hello","world",""]];sequence_len=[2]',
                    "--outdir", str(tmp_path), "--overwrite"],
                   env=env, capture_output=True, text=True, check=True)
    elmo = np.load(tmp_path / "elmo.npy")
    assert elmo.shape == (1, 3, 16) and elmo[0, :2].any() and not elmo[0, 2].any()


def test_grpc_predict_request_round_trip(export_dir, signature_defs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "elmo"
    request.model_spec.signature_name = "tokens"
    request.inputs["tokens"].CopyFrom(tf.make_tensor_proto([["the", "cat", ""], ["hi", "", ""]]))
    request.inputs["sequence_len"].CopyFrom(tf.make_tensor_proto([2, 1], dtype=tf.int32))
    received = predict_pb2.PredictRequest.FromString(request.SerializeToString())  # the wire
    signature = signature_defs[received.model_spec.signature_name]
    assert set(received.inputs) == set(signature.inputs)
    for key, proto in received.inputs.items():
        assert proto.dtype == signature.inputs[key].dtype
    serve = tf.saved_model.load(export_dir).signatures[received.model_spec.signature_name]
    outputs = serve(**{k: tf.constant(tf.make_ndarray(v)) for k, v in received.inputs.items()})
    response = predict_pb2.PredictResponse()
    response.model_spec.CopyFrom(received.model_spec)
    for key, value in outputs.items():
        response.outputs[key].CopyFrom(tf.make_tensor_proto(value.numpy()))
    response = predict_pb2.PredictResponse.FromString(response.SerializeToString())
    assert {k: v.dtype for k, v in response.outputs.items()} == {
        k: v[0] for k, v in OUTPUTS.items()}
    assert tf.make_ndarray(response.outputs["elmo"]).shape == (2, 3, 16)


def rest_predict(saved_model, body):
    """TF Serving's REST `:predict` JSON rules on a loaded SavedModel. A stand-in, not TF Serving.

    Row format: `{"signature_name": s, "instances": [...]}` -> `{"predictions": [...]}`, one item
    per example (a dict of named inputs, or the bare value for a one-input signature). Columnar
    format: `{"signature_name": s, "inputs": {...}}` -> `{"outputs": {...}}`.
    """
    body = json.loads(body)
    serve = saved_model.signatures[body.get("signature_name", "serving_default")]
    specs = serve.structured_input_signature[1]
    if "instances" in body:
        instances = body["instances"]
        if len(specs) == 1:
            instances = [{next(iter(specs)): i} for i in instances]
        inputs = {k: [i[k] for i in instances] for k in specs}
    else:
        inputs = body["inputs"] if isinstance(body["inputs"], dict) else {
            next(iter(specs)): body["inputs"]}
    outputs = serve(**{k: tf.constant(v, specs[k].dtype) for k, v in inputs.items()})
    outputs = {k: v.numpy().tolist() for k, v in outputs.items()}
    if "instances" in body:
        return json.dumps({"predictions": [{k: v[i] for k, v in outputs.items()}
                                           for i in range(len(instances))]})
    return json.dumps({"outputs": outputs})


def test_rest_bodies_in_row_and_columnar_format(export_dir):
    loaded = tf.saved_model.load(export_dir)
    # The bodies the README shows for POST /v1/models/elmo:predict.
    row = json.loads(rest_predict(loaded, json.dumps({
        "signature_name": "tokens",
        "instances": [{"tokens": ["the", "cat", "sat"], "sequence_len": 3},
                      {"tokens": ["hello", "", ""], "sequence_len": 1}]})))
    columnar = json.loads(rest_predict(loaded, json.dumps({
        "signature_name": "tokens",
        "inputs": {"tokens": [["the", "cat", "sat"], ["hello", "", ""]], "sequence_len": [3, 1]}})))
    sentences = json.loads(rest_predict(loaded, json.dumps({
        "signature_name": "default", "instances": ["the cat sat", "hello"]})))
    assert [set(p) for p in row["predictions"]] == [set(OUTPUTS)] * 2
    assert set(columnar["outputs"]) == set(OUTPUTS)
    for key, (_, shape) in OUTPUTS.items():
        assert np.array(columnar["outputs"][key]).shape[2:] == tuple(shape[2:])
        for i, prediction in enumerate(row["predictions"]):
            np.testing.assert_allclose(prediction[key], columnar["outputs"][key][i], atol=1e-6)
            np.testing.assert_allclose(sentences["predictions"][i][key],
                                       columnar["outputs"][key][i], atol=1e-6)
    assert row["predictions"][1]["mask"] == [True, False, False]
