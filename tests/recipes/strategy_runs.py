"""Subprocess entry point of `test_distributed.py`: trains recipes with the default strategy and
with `MirroredStrategy` over logical CPU devices, in one process.

    python -m tests.recipes.strategy_runs CORPUS_GLOB OUTPUT_BASE STEPS RECIPE.json...

The logical devices must be configured before TensorFlow starts, so `make_strategy` is the first
thing that touches TensorFlow. For each recipe (named by its mode) it writes
`OUTPUT_BASE/<mode>-default` and `OUTPUT_BASE/<mode>-mirrored` (a checkpoint every 2 steps) and
prints one JSON line, `RESULTS {mode: {strategy: {"steps", "train"}}}`: "train" holds the
training metrics of the last checkpoint interval (its last 2 steps).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(corpus, base, steps, *recipe_files):
    from elmo_tf.recipes import training

    mirrored = training.make_strategy("mirrored", 2)  # before anything starts TensorFlow
    assert mirrored.num_replicas_in_sync == 2, mirrored.num_replicas_in_sync

    from elmo_tf.recipes.recipe import Recipe

    results = {}
    for recipe_file in recipe_files:
        recipe = Recipe.from_file(recipe_file)
        for name, strategy in (("default", None), ("mirrored", mirrored)):
            output = os.path.join(base, f"{recipe.mode}-{name}")
            result = training.train(recipe, corpus, output, strategy=strategy,
                                    steps=int(steps), seed=0, checkpoint_every=2, verbose=0)
            results.setdefault(recipe.mode, {})[name] = {
                "steps": result["steps"], "train": result["train"]}
    print("RESULTS " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
