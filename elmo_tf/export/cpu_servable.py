"""SavedModels that serve on a CPU-only machine wherever they were exported: traced with
portable kernels, and checked for ops a CPU-only TensorFlow cannot run."""

import contextlib

import tensorflow as tf

from elmo_tf.keras_compat import (
    attribute_set,
    kernel_device_types,
    saved_model_graphs,
    sublayers,
)

# Devices whose kernels a CPU-only TensorFlow runs (NoOp and Assert are registered for the
# "DEFAULT" device, not for "CPU").
_CPU_DEVICES = ("CPU", "DEFAULT")


@contextlib.contextmanager
def portable_recurrences(layer):
    """While the block runs, Keras's LSTM and GRU layers inside `layer` trace their portable
    kernel (`use_cudnn=False`), wherever the process runs; their own setting is back after it.

    Keras 3 chooses cuDNN when it traces a layer in a process that sees a GPU, and puts a
    `CudnnRNNV3` op, which has no CPU kernel, in the graph: a SavedModel exported on a GPU
    machine would then not load on a CPU server. Training and in-memory inference keep cuDNN.

    Example:
    >>> with portable_recurrences(model):
    ...     tf.saved_model.save(module, "serving/1", signatures=signatures)
    """
    layers = [l for l in sublayers(layer) if getattr(l, "use_cudnn", None) in ("auto", True)]
    with attribute_set(layers, "use_cudnn", False):
        yield


def check_cpu_servable(saved_model_dir, what):
    """Raises ValueError, naming `what`, each offending op and a function or node that uses it,
    when the SavedModel in `saved_model_dir` holds an op that a stock CPU-only TensorFlow (a CPU
    TF Serving) cannot run: one with no CPU kernel (cuDNN's, XLA's), or one that is not core
    TensorFlow (tensorflow-text's, another library's: a server would need that library).

    Example:
    >>> check_cpu_servable("serving/elmo/1", "the SavedModel serving/elmo/1")
    """
    found = {}  # op -> where it is first used
    for graph in saved_model_graphs(saved_model_dir):
        functions = {f.signature.name for f in graph.library.function}
        places = [(n, "the graph") for n in graph.node] + [
            (n, f"function {f.signature.name}") for f in graph.library.function
            for n in f.node_def]
        for node, place in places:
            if node.op not in functions:
                found.setdefault(node.op, f"node {node.name} of {place}")
    problems = []
    for op, where in sorted(found.items()):
        if not hasattr(tf.raw_ops, op):
            problems.append(f"{op} (not a core TensorFlow op; {where})")
        elif not kernel_device_types(op) & set(_CPU_DEVICES):
            problems.append(f"{op} (no CPU kernel; {where})")
    if problems:
        raise ValueError(
            f"{what} would not serve on a CPU-only machine: its graph uses "
            f"{'; '.join(problems)}. Exports must hold core TensorFlow ops with CPU kernels; a "
            "Keras LSTM or GRU inside the model is traced with use_cudnn=False at export, any "
            "other GPU-only or library op must go.")
