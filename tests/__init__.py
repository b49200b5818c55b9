"""Shared by the tests (`tests/conftest.py`) and by their own subprocess entry points."""


def graph_rewrites_off():
    """TensorFlow's graph optimiser (Grappler) left out of this process: each `tf.function`
    runs the graph it traced, without the rewrites Grappler makes on its first call (constant
    folding, arithmetic and layout rewrites, op fusion, pruning). They change how a graph is
    computed, not what it computes (float rounding within the tests' tolerances aside), and on
    the tests' tiny models they cost more than they save: a 4-step `train` of the training
    tests' model in 0.77x the CPU seconds, the same metrics to the last bit (6 runs each way,
    2026-11-29). XLA-compiled steps do not go through Grappler. Set in the pytest processes
    on machines without an NVIDIA GPU (`tests/conftest.py`) and in the tests' own subprocess
    entry points, which run on CPUs (`tests/training/strategy_runs.py`,
    `tests/stalled_writer.py`); the `elmo-tf` commands the tests start as subprocesses keep
    Grappler, as a user's do."""
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
