"""Subprocess entry point of `test_distributed.py`: trains recipes with the default strategy and
with `MirroredStrategy` over logical CPU devices, in one process.

    python -m tests.training.strategy_runs CORPUS_GLOB OUTPUT_BASE STEPS \
        RECIPE.json:RUN,RUN...[@ITS_CORPUS_GLOB] ...

The logical devices must be configured before TensorFlow starts, so `make_strategy` is the first
thing that touches TensorFlow. For each recipe (named by its file's stem) it trains the runs
named after it (`RUNS`: `default`, no strategy; `mirrored`, 2 replicas; `mirrored-xla`, 2
replicas with XLA per replica; `mirrored-xla-resumed`, the same trained to half its steps, then
resumed with the `xla` setting left out; `mirrored-xla-refuses`, one step with a Python
function in the model, which XLA cannot compile: its error, or None) on CORPUS_GLOB, or on the
recipe's own corpus where one follows its runs, into
`OUTPUT_BASE/<name>-<run>` (a checkpoint every 2 steps) and prints one JSON line,
`RESULTS {name: {run: {"steps", "train", "xla"}}, "optimizers": {...}}`: "train" holds the
training metrics of the last checkpoint interval (its last 2 steps), "xla" what run.json
records, "optimizers" `optimizer_difference`'s figure for `SparseAdagrad` and `Adam`, "export"
`exported_trainable`'s.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


RUNS = {"default": (False, "off"), "mirrored": (True, "off"), "mirrored-xla": (True, "on"),
        "mirrored-xla-resumed": (True, "on"),
        "mirrored-xla-refuses": (True, "on")}  # name: (mirrored, xla)


def main(corpus, base, steps, *recipes_and_runs):
    from elmo_tf import training

    mirrored = training.make_strategy("mirrored", 2)  # before anything starts TensorFlow
    assert mirrored.num_replicas_in_sync == 2, mirrored.num_replicas_in_sync

    from elmo_tf.recipes.recipe import Recipe

    results = {}
    for argument in recipes_and_runs:
        recipe_and_runs, _, own = argument.partition("@")
        recipe_file, runs = recipe_and_runs.rsplit(":", 1)
        recipe_corpus = own or corpus
        recipe = Recipe.from_file(recipe_file)
        stem = os.path.splitext(os.path.basename(recipe_file))[0]
        for name in runs.split(","):
            on_mirrored, xla = RUNS[name]
            strategy = mirrored if on_mirrored else None
            output = os.path.join(base, f"{stem}-{name}")
            if name.endswith("-resumed"):  # half, then the rest with the setting left out
                training.train(recipe, recipe_corpus, output, strategy=strategy,
                               steps=int(steps) // 2, seed=0, checkpoint_every=2, verbose=0,
                               xla=xla)
                xla = None
            if name.endswith("-refuses"):
                results.setdefault(stem, {})[name] = _refused(recipe, recipe_corpus, output,
                                                              strategy)
                continue
            result = training.train(recipe, recipe_corpus, output, strategy=strategy,
                                    steps=int(steps), seed=0, checkpoint_every=2, verbose=0,
                                    xla=xla)
            with open(os.path.join(output, "run.json")) as f:
                record = json.load(f)
            results.setdefault(stem, {})[name] = {
                "steps": result["steps"], "train": result["train"],
                "xla": [record["xla"], record["xla_compiled"]]}
    from elmo_tf.optimizers import Adam, SparseAdagrad

    results["optimizers"] = {
        "sparse_adagrad": optimizer_difference(mirrored, lambda: SparseAdagrad(
            0.2, global_clipnorm=1.0)),
        "adam": optimizer_difference(mirrored, lambda: Adam(0.01, global_clipnorm=1.0))}
    results["export"] = exported_trainable(mirrored, base)
    print("RESULTS " + json.dumps(results), flush=True)


def exported_trainable(mirrored, base):
    """An `ElmoEmbedding` made under the 2 mirrored replicas, exported
    (`export_saved_model`): the names of the SavedModel's trainable variables, and how many
    variables it has."""
    import tensorflow as tf

    from elmo_tf.export import export_saved_model
    from elmo_tf.models import ElmoBackbone, ElmoEmbedding
    from elmo_tf.models.family import architecture

    with mirrored.scope():
        embedding = ElmoEmbedding(ElmoBackbone(architecture("tiny"), dropout=0.0))
        embedding(tf.constant([["a", "cat"]]))
        path = export_saved_model(embedding, os.path.join(base, "export"))
    loaded = tf.saved_model.load(path)
    return {"trainable": sorted(v.name for v in loaded.trainable_variables),
            "variables": len(loaded.variables)}


def _refused(recipe, corpus, output, strategy):
    """One step with an op XLA cannot compile (a Python function) in the model: the error, or
    None when the step ran (a step that was not compiled)."""
    import tensorflow as tf

    from elmo_tf import training
    from elmo_tf.models.language_model import LanguageModel

    top_layer = LanguageModel.top_layer

    def with_python(self, layers, training, index=-1):
        top = top_layer(self, layers, training, index)
        return tf.py_function(lambda t: t, [top], top.dtype)

    LanguageModel.top_layer = with_python
    try:
        training.train(recipe, corpus, output, strategy=strategy, steps=1, seed=0, verbose=0,
                       xla=RUNS[os.path.basename(output).split("-", 1)[1]][1])
        return {"error": None}
    except Exception as error:  # noqa: BLE001 - the error is the result
        return {"error": f"{type(error).__name__}: {error}"[:3000]}
    finally:
        LanguageModel.top_layer = top_layer


def optimizer_difference(mirrored, make_optimizer):
    """The largest |difference| between a table updated by an optimizer under 2 mirrored
    replicas, each with its own row-sparse gradient (rows repeated within and across the
    replicas), and one updated under the default strategy with both replicas' gradients as one
    (what the cross-replica sum must give); 3 steps, each clipped (norm ~20, clip 1)."""
    import keras
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    start = rng.normal(size=(30, 4)).astype("float32")
    indices = tf.constant([[1, 5, 1, 9], [5, 20, 2, 1]])  # [replica, row]
    steps = [tf.constant(rng.normal(size=(2, 4, 4)) * 5, tf.float32) for _ in range(3)]

    def per_replica(values):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.IndexedSlices(tf.gather(values, replica), tf.gather(indices, replica),
                                tf.constant([30, 4]))

    def as_one(values):
        return tf.IndexedSlices(tf.reshape(values, [-1, 4]), tf.reshape(indices, [-1]),
                                tf.constant([30, 4]))

    tables = []
    for strategy, gradient in ((mirrored, per_replica), (tf.distribute.get_strategy(), as_one)):
        with strategy.scope():
            table = keras.Variable(start)
            optimizer = make_optimizer()
            optimizer.build([table])

        @tf.function
        def step(values):
            strategy.run(lambda v: optimizer.apply([gradient(v)], [table]), args=(values,))

        for values in steps:
            step(values)
        tables.append(table.numpy())
    assert np.abs(tables[0] - start).max() > 1e-2  # it did train
    return float(np.abs(tables[0] - tables[1]).max())


if __name__ == "__main__":
    main(*sys.argv[1:])
