"""SavedModel export for TF Serving and TF Hub (`docs/conventions.md` §5)."""

import os
import re

import tensorflow as tf

from elmo_tf.export.cpu_servable import check_cpu_servable, portable_recurrences
from elmo_tf.files import (
    check_free_space,
    remove_stale_temporaries,
    variables_bytes,
    write_new_directory,
)
from elmo_tf.keras_compat import saved_as_untrainable, trackable_object
from elmo_tf.ops.chunking import map_in_chunks

# Rows (sentences) run through the model at a time inside the served graph: the model's
# intermediate tensors for a request of any size (10,000 sentences, say) are those of this many.
SERVING_ROWS_PER_CHUNK = 256


def export_saved_model(embedding, export_base, version=None):
    """Writes `embedding` as a SavedModel in `export_base/<version>/`, atomically.

    The SavedModel stands in for TF Hub's `google/elmo/3` (spec §5) and serves with TF Serving:

    * signature `tokens` (also `serving_default`): `tokens` string `[batch, max_len]` padded with
      `""` and `sequence_len` int32 `[batch]` (positions at or past it are padding; it must lie
      in `[0, max_len]`); signature `default`: `default`, untokenized sentences string `[batch]`,
      split on whitespace in the graph.
    * outputs: `word_emb` `[batch, max_len, P]` (the char encoder's token vectors),
      `lstm_outputs1` ... `lstm_outputs{n_layers}` and `elmo` (the scalar mix) `[batch, max_len,
      2P]`, `default` `[batch, 2P]` (`elmo` averaged over the real tokens; zeros for an empty
      sentence) and `mask` bool `[batch, max_len]`; float32, zeros at padding.
    * the TF2 reusable SavedModel API for `hub.KerasLayer(..., trainable=True)` and
      `ElmoEmbedding.from_saved_model`: `__call__(tokens, training)` returning `elmo`, traced
      for both values of `training`; `variables`; `trainable_variables` (the mix, plus the biLM
      when `embedding.fine_tune`; the others are saved as not trainable, so that
      `keras.layers.TFSMLayer(..., trainable=True)` trains the same); `regularization_losses`
      (the mix's L2 penalty, if any).

    The graph holds core TensorFlow ops with CPU kernels only (no tensorflow-text, no cuDNN, no
    XLA-only op; `check_cpu_servable`), so it serves on a CPU-only machine wherever it was
    exported.
    Requests run through the model `SERVING_ROWS_PER_CHUNK` sentences at a time, so the model's
    intermediate tensors stay the size of one such chunk however large the batch; the outputs
    themselves grow with batch x max_len.

    Args:
        embedding: an `ElmoEmbedding` with one representation, no layer norm (its batch-wide
            statistics would make a served sentence depend on the requests batched with it) and
            a stateless backbone.
        export_base: the model's base directory, as TF Serving expects (`export_base/1/`, ...).
        version: the version directory to create; by default one more than the highest there.

    Returns:
        The path of the new version directory. Nothing is left behind if the export fails.

    Example:
    >>> elmo = ElmoEmbedding.from_allennlp("options.json", "weights.hdf5", dropout=0.0)
    >>> export_saved_model(elmo, "serving/elmo")
    'serving/elmo/1'
    """
    _check_exportable(embedding)
    module, signatures = _serving_module(embedding)
    trained = {id(v) for v in embedding.trainable_weights}
    # What the reusable API does not train is saved as not trainable (TFSMLayer reads it).
    with saved_as_untrainable([v for v in embedding.weights if id(v) not in trained]):
        return save_version(module, signatures, export_base, version, embedding)


def save_version(module, signatures, export_base, version, model):
    """`tf.saved_model.save(module, ...)` of `model` (the Keras layer it serves) into a new
    version directory of `export_base` (the next one by default), atomically
    (`write_new_directory`: written to a temporary directory beside it, `1.elmo-tf-*.tmp`,
    which TF Serving skips as it is no version number, then renamed; a version another export
    wrote meanwhile is never written into).

    The functions are traced with portable kernels (`portable_recurrences`) and the graph
    checked (`check_cpu_servable`), so that the version serves on a CPU-only machine wherever
    it was exported. Checks first that the disk has room for `model`'s variables and a few MB
    of graph; a failed write is an `OSError` naming the SavedModel and leaves nothing behind,
    and what a killed export left in `export_base` goes before the next one writes.
    Returns the version directory's path."""
    export_base = os.fspath(export_base)
    os.makedirs(export_base, exist_ok=True)
    if version is None:
        versions = [int(d) for d in os.listdir(export_base) if re.fullmatch(r"\d+", d)]
        version = max(versions, default=0) + 1
    target = os.path.join(export_base, str(int(version)))
    if os.path.exists(target):
        raise ValueError(f"{target} already exists; TF Serving versions are never overwritten. "
                         "Pick another version.")
    remove_stale_temporaries(export_base)  # a killed export's, of whichever version
    check_free_space(export_base, variables_bytes(model.weights) + 16 * 2**20,
                     f"the SavedModel {target}")

    def write(staging):
        try:
            with portable_recurrences(model):
                tf.saved_model.save(module, staging, signatures=signatures)
        except tf.errors.OpError as error:  # a full disk, a quota, a file-size limit, ...
            raise OSError(f"writing the SavedModel {target} failed: {error.message}") from None
        check_cpu_servable(staging, f"the SavedModel {target}")

    write_new_directory(target, write)
    return target


def _check_exportable(embedding):
    from elmo_tf.models.elmo_embedding import ElmoEmbedding

    if not isinstance(embedding, ElmoEmbedding):
        raise TypeError(f"export_saved_model takes an ElmoEmbedding; got "
                        f"{type(embedding).__name__}.")
    problems = []
    if embedding.num_output_representations != 1:
        problems.append(f"num_output_representations={embedding.num_output_representations} "
                        "(the export has one `elmo` output)")
    if embedding.do_layer_norm:
        problems.append("do_layer_norm=True (batch-wide statistics would make a served sentence "
                        "depend on the other requests in its batch)")
    if embedding.backbone.stateful:
        problems.append("a stateful backbone (served vectors must not depend on earlier requests)")
    if problems:
        raise ValueError("cannot export this ElmoEmbedding: " + "; ".join(problems) + ".")


def _serving_module(embedding):
    """(the object saved: the reusable SavedModel API and the tracked layer, its signatures)."""
    if not embedding.built:
        embedding.build((None, None))  # the mixes' weights must exist before they are listed
    backbone = embedding.backbone  # only its contract is used (elmo_tf.models.backbone)
    n_layers = backbone.num_layers - 1  # the recurrent layers: lstm_outputs1, ...
    remove_boundaries = embedding.remove_boundaries
    tokens_spec = tf.TensorSpec([None, None], tf.string)
    width = backbone.output_dim
    output_specs = {"word_emb": tf.TensorSpec([None, None, backbone.token_dim]),
                    "elmo": tf.TensorSpec([None, None, width]),
                    "mask": tf.TensorSpec([None, None], tf.bool),
                    **{f"lstm_outputs{k}": tf.TensorSpec([None, None, width])
                       for k in range(1, n_layers + 1)}}

    def chunk_outputs(tokens):
        outputs = embedding.backbone_outputs(embedding.preprocessor(tokens), training=False)
        mask = outputs["mask"]
        word_emb, _ = remove_boundaries(outputs["token_embeddings"],
                                        outputs["mask_with_boundaries"])
        result = {"word_emb": word_emb, "elmo": embedding.mix(outputs, training=False),
                  "mask": mask}
        for k in range(1, n_layers + 1):
            result[f"lstm_outputs{k}"] = outputs["layers"][:, k]
        return {k: tf.cast(v, tf.float32) if v.dtype.is_floating else v
                for k, v in result.items()}

    def all_outputs(tokens):
        """Every output for `tokens`, SERVING_ROWS_PER_CHUNK sentences at a time."""
        out = map_in_chunks(chunk_outputs, tokens, SERVING_ROWS_PER_CHUNK, output_specs)
        mask = tf.cast(out["mask"], tf.float32)[:, :, None]
        count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
        out["default"] = tf.reduce_sum(out["elmo"] * mask, axis=1) / count
        return out

    @tf.function(input_signature=[tokens_spec, tf.TensorSpec([None], tf.int32)], autograph=False)
    def serve_tokens(tokens, sequence_len):
        # A signature checks its inputs' dtypes, not their shapes: a request of another rank
        # would fail deep inside the model. This fails first, with "Shape of tensor tokens [2]
        # is not compatible with expected shape [?,?]". (A rank assertion would not run:
        # TensorFlow folds it to true from the declared shape.)
        tokens = tf.ensure_shape(tokens, [None, None], name="tokens")
        sequence_len = tf.ensure_shape(sequence_len, [None], name="sequence_len")
        time = tf.shape(tokens)[1]
        checks = [
            tf.debugging.assert_equal(tf.shape(sequence_len)[0], tf.shape(tokens)[0],
                                      message="sequence_len needs one length per row of tokens"),
            tf.debugging.assert_non_negative(sequence_len,
                                             message="sequence_len must not be negative"),
            tf.debugging.assert_less_equal(sequence_len, time,
                                           message="sequence_len must not exceed max_len, the "
                                                   "width of tokens"),
        ]
        with tf.control_dependencies(checks):
            tokens = tf.where(tf.sequence_mask(sequence_len, time), tokens, "")
        return all_outputs(tokens)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="default")],
                 autograph=False)
    def serve_default(default):
        default = tf.ensure_shape(default, [None], name="default")  # as in serve_tokens
        ragged = tf.strings.split(default)
        time = tf.cast(ragged.bounding_shape()[1], tf.int32)  # 0 for an empty batch, too
        return all_outputs(tf.reshape(ragged.to_tensor(default_value=""),
                                      tf.stack([tf.shape(default)[0], time])))

    @tf.function(input_signature=[tokens_spec], autograph=False)
    def call_inference(tokens):
        return tf.cast(embedding(tokens, training=False), tf.float32)

    @tf.function(input_signature=[tokens_spec], autograph=False)
    def call_training(tokens):
        return tf.cast(embedding(tokens, training=True), tf.float32)

    def call(tokens, training=False):
        return call_training(tokens) if training else call_inference(tokens)

    module = trackable_object()
    module.embedding = embedding
    module.variables = [v.value for v in embedding.variables]  # dropout seed state included
    module.trainable_variables = [v.value for v in embedding.trainable_weights]
    module.regularization_losses = _regularization_losses(embedding)
    module.__call__ = tf.function(call, autograph=False)
    module.__call__.get_concrete_function(tokens_spec, training=False)
    module.__call__.get_concrete_function(tokens_spec, training=True)
    signatures = {"serving_default": serve_tokens, "tokens": serve_tokens,
                  "default": serve_default}
    return module, signatures


def _regularization_losses(embedding):
    """Zero-argument functions for the mixes' L2 penalties (bilm-tf's `l2_coef * sum(w**2)`)."""
    def penalty(weights, coef):
        return tf.function(lambda: coef * tf.reduce_sum(tf.square(weights)), input_signature=[],
                           autograph=False)

    return [penalty(mix.scalar_weights.value, mix.l2_coef) for mix in embedding.scalar_mixes
            if mix.l2_coef and mix.trainable_weights]
