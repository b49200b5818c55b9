"""SavedModel export of a fine-tuned downstream task model, for TF Serving."""

import tensorflow as tf

from elmo_tf.export.saved_model import save_version
from elmo_tf.models.downstream.downstream_task import DownstreamTask


def export_task_model(model, export_base, version=None):
    """Writes a downstream task model (`TextClassifier`, `SentencePairClassifier`,
    `SequenceTagger`, any `DownstreamTask`) as a SavedModel in `export_base/<version>/`,
    atomically, for TF Serving.

    Signature `serving_default` is the task's own (`DownstreamTask.serving_function`): raw text
    in, as the model takes it (`text`; `text_a` and `text_b` for a pair model; `tokens`,
    whitespace-separated, for a tagger), `logits` (float32) and the prediction by name out
    (`label` string `[batch]`, or `score` float32 `[batch]` for a regressor, or `tags` string
    `[batch, time]` for a tagger, `""` past each sentence's tokens). Core TensorFlow ops with
    CPU kernels only: it loads and serves without elmo-tf or tensorflow-text, on a CPU-only
    machine wherever it was exported (the head's LSTMs are traced without cuDNN; training
    keeps it).

    Args:
        model: the task model (e.g. `load_task_model("OUT")`, a `finetune` output).
        export_base: the model's base directory, as TF Serving expects.
        version: the version directory to create; by default one more than the highest there.

    Returns:
        The path of the new version directory.

    Example:
    >>> export_task_model(load_task_model("runs/sst2"), "serving/sst2")
    'serving/sst2/1'
    """
    if not isinstance(model, DownstreamTask):
        raise TypeError(f"export_task_model takes a downstream task model (TextClassifier, "
                        f"SentencePairClassifier, SequenceTagger, ...); got "
                        f"{type(model).__name__}.")
    embedding = model.embedding
    if embedding.backbone.stateful or embedding.do_layer_norm:
        raise ValueError("cannot export a task model whose ElmoEmbedding has a stateful "
                         "backbone or layer norm: a served sentence would depend on other "
                         "requests.")
    module = tf.Module()
    # The tf.Variables the graph reads, and nothing else: not the Keras model, whose optimizer
    # (Adam's two slots per trained weight) serving never reads.
    module.model_variables = [v.value for v in model.variables]
    return save_version(module, {"serving_default": model.serving_function()}, export_base,
                        version, model)
