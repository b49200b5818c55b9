"""Exports serve on a CPU-only machine wherever they were written: the graph check refuses a
GPU-only op and a library's op, naming them, and leaves nothing on disk."""

import os

import keras
import pytest
import tensorflow as tf

from elmo_tf.export.cpu_servable import portable_recurrences
from elmo_tf.export.saved_model import save_version
from tests.conftest import keras_sees_a_gpu


def _module(function, model):
    module = tf.Module()
    module.model = model
    module.serve = function
    return module


def test_a_gpu_only_op_is_refused_by_name_and_nothing_is_left(tmp_path, monkeypatch):
    """A function traced before the export on the GPU code path holds CudnnRNNV3, which no CPU
    kernel runs: the export names it and where it is, and writes no version."""
    keras_sees_a_gpu(monkeypatch)
    lstm = keras.layers.LSTM(3, return_sequences=True)
    serve = tf.function(lambda x: lstm(x), input_signature=[tf.TensorSpec([None, None, 2])])
    serve.get_concrete_function()  # traced here, outside the export's portable tracing
    with pytest.raises(ValueError, match=r"the SavedModel .*1 would not serve on a CPU-only "
                                         r"machine: its graph uses CudnnRNNV3 \(no CPU kernel; "
                                         r"node .*CudnnRNNV3 of function"):
        save_version(_module(serve, lstm), {"serving_default": serve}, tmp_path / "base", None,
                     lstm)
    assert os.listdir(tmp_path / "base") == []


def test_a_library_op_is_refused(tmp_path):
    """tensorflow-text's ops have CPU kernels once the library is loaded, but a stock TF Serving
    does not have them."""
    text = pytest.importorskip("tensorflow_text")
    tokenizer = text.WhitespaceTokenizer()
    layer = keras.layers.Identity()
    serve = tf.function(lambda x: tokenizer.tokenize(x).to_tensor(),
                        input_signature=[tf.TensorSpec([None], tf.string)])
    with pytest.raises(ValueError, match=r"would not serve on a CPU-only machine: its graph uses "
                                         r".*WhitespaceTokenize\S* \(not a core TensorFlow op"):
        save_version(_module(serve, layer), {"serving_default": serve}, tmp_path, None, layer)
    assert os.listdir(tmp_path) == []


def test_portable_recurrences_trace_without_cudnn_and_restore_the_setting(monkeypatch):
    keras_sees_a_gpu(monkeypatch)
    inputs = keras.Input((None, 2))
    model = keras.Model(inputs, keras.layers.Bidirectional(
        keras.layers.GRU(3, return_sequences=True, use_cudnn=True))(inputs))

    def ops():
        return {op.type for op in tf.function(model).get_concrete_function(
            tf.TensorSpec([None, None, 2])).graph.get_operations()}

    assert "CudnnRNNV3" in ops()
    with portable_recurrences(model):
        assert not [op for op in ops() if "Cudnn" in op]
    recurrent = [model.layers[1].forward_layer, model.layers[1].backward_layer]
    assert [l.use_cudnn for l in recurrent] == [True, True]
