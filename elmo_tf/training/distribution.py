"""`tf.distribute` for training: the strategy a run asks for, and who the chief is."""

import os

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi-worker")


def make_strategy(name, cpu_replicas=None):
    """The `tf.distribute` strategy `name`: `default`, `mirrored` or `multi-worker`.

    `mirrored` uses every local GPU, or, without GPUs, `cpu_replicas` logical CPU devices (2 by
    default; set before TensorFlow starts its devices, so call this first). `multi-worker`
    reads the cluster from the `TF_CONFIG` environment variable.

    Example:
    >>> strategy = make_strategy("mirrored")   # before anything else touches TensorFlow
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; accepted: {list(STRATEGIES)}.")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "multi-worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy multi-worker reads the cluster from the TF_CONFIG "
                             "environment variable, which is not set.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if tf.config.list_physical_devices("GPU"):
        return _mirrored(None)
    cpus = tf.config.list_physical_devices("CPU")
    count = cpu_replicas or 2
    try:  # listing logical devices would start the runtime: configure first
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        if len(tf.config.list_logical_devices("CPU")) != count:
            raise ValueError(f"cannot split the CPU into {count} logical devices: TensorFlow "
                             "has already started; make the strategy first.") from None
    return _mirrored(tuple(f"/cpu:{i}" for i in range(count)))


_MIRRORED = {}


def _mirrored(devices):
    """One `MirroredStrategy` per device set and process: a second one over the same devices
    would number its collective ops as the first did, and TensorFlow, which keeps each
    instance's shape for the process, refuses the same numbers with other shapes (a second run
    of another model in one process)."""
    if devices not in _MIRRORED:
        _MIRRORED[devices] = tf.distribute.MirroredStrategy(
            None if devices is None else list(devices))
    return _MIRRORED[devices]


def is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def is_chief(strategy):
    """Whether this process is the chief of its cluster (always, outside multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not is_multi_worker(strategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)
