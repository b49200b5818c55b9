"""Subprocess entry point of `test_distributed.py`: trains recipes with the default strategy and
with `MirroredStrategy` over logical CPU devices, in one process.

    python -m tests.training.strategy_runs CORPUS_GLOB OUTPUT_BASE STEPS RECIPE.json...

The logical devices must be configured before TensorFlow starts, so `make_strategy` is the first
thing that touches TensorFlow. For each recipe (named by its file's stem) it writes
`OUTPUT_BASE/<name>-default` and `OUTPUT_BASE/<name>-mirrored` (a checkpoint every 2 steps) and
prints one JSON line, `RESULTS {name: {strategy: {"steps", "train"}}, "optimizers": {...}}`:
"train" holds the training metrics of the last checkpoint interval (its last 2 steps),
"optimizers" `optimizer_difference`'s figure for `SparseAdagrad` and `Adam`.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(corpus, base, steps, *recipe_files):
    from elmo_tf import training

    mirrored = training.make_strategy("mirrored", 2)  # before anything starts TensorFlow
    assert mirrored.num_replicas_in_sync == 2, mirrored.num_replicas_in_sync

    from elmo_tf.recipes.recipe import Recipe

    results = {}
    for recipe_file in recipe_files:
        recipe = Recipe.from_file(recipe_file)
        stem = os.path.splitext(os.path.basename(recipe_file))[0]
        for name, strategy in (("default", None), ("mirrored", mirrored)):
            output = os.path.join(base, f"{stem}-{name}")
            result = training.train(recipe, corpus, output, strategy=strategy,
                                    steps=int(steps), seed=0, checkpoint_every=2, verbose=0)
            results.setdefault(stem, {})[name] = {
                "steps": result["steps"], "train": result["train"]}
    from elmo_tf.optimizers import Adam, SparseAdagrad

    results["optimizers"] = {
        "sparse_adagrad": optimizer_difference(mirrored, lambda: SparseAdagrad(
            0.2, global_clipnorm=1.0)),
        "adam": optimizer_difference(mirrored, lambda: Adam(0.01, global_clipnorm=1.0))}
    print("RESULTS " + json.dumps(results), flush=True)


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
