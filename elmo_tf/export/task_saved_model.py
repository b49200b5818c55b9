"""SavedModel export of a fine-tuned downstream task model, for TF Serving."""

import tensorflow as tf

from elmo_tf.export.saved_model import save_version
from elmo_tf.models.downstream import SentencePairClassifier, SequenceTagger
from elmo_tf.models.downstream.downstream_task import DownstreamTask


def export_task_model(model, export_base, version=None):
    """Writes a task model (`TextClassifier`, `SentencePairClassifier`, `SequenceTagger`) as a
    SavedModel in `export_base/<version>/`, atomically, for TF Serving.

    Signature `serving_default` takes raw text, as the model does: `text` string `[batch]`
    (`tokens`, whitespace-separated, for a tagger; `text_a` and `text_b` for a pair model), and
    returns `logits` (float32) and the prediction by name: `label` string `[batch]`, or
    `score` float32 `[batch]` for a regressor, or `tags` string `[batch, time]` for a tagger
    (`""` past each sentence's tokens). Core TensorFlow ops with CPU kernels only: it loads and
    serves without elmo-tf or tensorflow-text, on a CPU-only machine wherever it was exported
    (the head's LSTMs are traced without cuDNN; training keeps it).

    Args:
        model: the task model (e.g. `keras.saving.load_model("OUT/model.keras")`).
        export_base: the model's base directory, as TF Serving expects.
        version: the version directory to create; by default one more than the highest there.

    Returns:
        The path of the new version directory.

    Example:
    >>> export_task_model(keras.saving.load_model("runs/sst2/model.keras"), "serving/sst2")
    'serving/sst2/1'
    """
    if not isinstance(model, DownstreamTask):
        raise TypeError(f"export_task_model takes a TextClassifier, SentencePairClassifier or "
                        f"SequenceTagger; got {type(model).__name__}.")
    embedding = model.embedding
    if embedding.backbone.stateful or embedding.do_layer_norm:
        raise ValueError("cannot export a task model whose ElmoEmbedding has a stateful "
                         "backbone or layer norm: a served sentence would depend on other "
                         "requests.")
    names = None if model.labels is None else tf.constant(model.labels)
    tokenizer = model.get_layer("tokenizer")

    def predictions(inputs, logits):
        out = {"logits": logits}
        if isinstance(model, SequenceTagger):
            real = tf.not_equal(tokenizer(inputs), "")
            out["tags"] = tf.where(real, tf.gather(names, tf.argmax(logits, -1)), "")
        elif names is None:
            out["score"] = logits[:, 0]
        else:
            out["label"] = tf.gather(names, tf.argmax(logits, -1))
        return out

    if isinstance(model, SentencePairClassifier):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                      tf.TensorSpec([None], tf.string, name="text_b")])
        def serve(text_a, text_b):
            inputs = {"text_a": tf.ensure_shape(text_a, [None], name="text_a"),
                      "text_b": tf.ensure_shape(text_b, [None], name="text_b")}
            return predictions(inputs["text_a"], model(inputs, training=False))
    else:
        name = "tokens" if isinstance(model, SequenceTagger) else "text"

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=name)])
        def serve(texts):
            texts = tf.ensure_shape(texts, [None], name=name)  # as the embedding export
            return predictions(texts, model(texts, training=False))

    module = tf.Module()
    module.model = model
    module.model_variables = [v.value for v in model.variables]  # the tf.Variables the graph reads
    return save_version(module, {"serving_default": serve}, export_base, version, model)
