"""Every place elmo-tf reaches into Keras's or TensorFlow's private API, in one file: each hook
says what it does, why it is needed and what upstream change would make it unnecessary. The
rest of the package calls these names and never a private attribute of Keras or TensorFlow.

They are written for the versions `setup.cfg` pins (`KERAS_VERSIONS`, `TENSORFLOW_VERSIONS`):
`check_versions` refuses others when elmo-tf is imported, with a message that says what to do,
rather than letting a hook fail deep inside a run.
"""

import contextlib
import io
import os
import sys
import time

import keras
import tensorflow as tf
from keras.src.losses.loss import unscale_loss_for_distribution
from keras.src.saving import saving_lib
from keras.src.utils import io_utils
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.autograph.core import config as autograph_config
from tensorflow.python.autograph.core import config_lib as autograph_rules
from tensorflow.python.eager import context
from tensorflow.python.eager import record
from tensorflow.python.framework import kernels
from tensorflow.python.ops import control_flow_util

# The minor versions these hooks were written and tested against.
KERAS_VERSIONS = ("3.15",)
TENSORFLOW_VERSIONS = ("2.21",)


def check_versions(keras_version=None, tensorflow_version=None):
    """Raises ImportError naming the Keras or TensorFlow version found and the ones elmo-tf's
    private hooks were written for, unless both are among them (by default: the installed
    ones)."""
    for name, version, known in (("Keras", keras_version or keras.__version__, KERAS_VERSIONS),
                                 ("TensorFlow", tensorflow_version or tf.__version__,
                                  TENSORFLOW_VERSIONS)):
        if ".".join(version.split(".")[:2]) not in known:
            raise ImportError(
                f"elmo-tf reaches into {name} internals written for {name} "
                f"{' or '.join(known)}.x, and {name} {version} is installed: install the "
                "versions setup.cfg pins (pip install -e . does), or port "
                "elmo_tf/keras_compat.py to this one.")


check_versions()


def trace_without_autograph(package="elmo_tf"):
    """Has AutoGraph leave the functions of `package` (its modules' functions, methods and
    lambdas) as they are written when `tf.function`, `tf.data` or `tf.map_fn` trace them, as it
    leaves TensorFlow's and Keras's own. elmo-tf's graph code branches and loops on tensors
    with `tf.cond` and `tf.while_loop` only, so converting it changed nothing but cost each
    process that trains or reads a corpus 1.8 to 2.3 s of CPU (14 functions' source parsed and
    rewritten): a tiny `elmo-tf` command takes 0.83x to 0.97x the CPU without it, 1.2 to 1.8 s
    less (`bench/results/revisions-cpu-e035a57-autograph.json`). It also wrote
    `__autograph_generated_file*.py` temporaries. A user's functions, given to elmo-tf's
    pipelines or not, are converted as before (a callable tokenizer: `get_tokenizer`). Called
    when elmo_tf is imported. (Every `tf.function` of elmo-tf's says whether AutoGraph converts
    it, `autograph=False` but where it may call a user's code: AutoGraph converts the function
    a `tf.function` is given whatever its module, and nothing under `autograph=False`.)

    Private: `tensorflow.python.autograph.core.config.CONVERSION_RULES`, the rule list that
    exempts `tensorflow` and `keras`; the public `tf.autograph.experimental.do_not_convert`
    marks one function at a time (no upstream issue found for a package-wide one)."""
    rule = autograph_rules.DoNotConvert(package)
    if not any(isinstance(r, autograph_rules.DoNotConvert) and r.matches(package)
               for r in autograph_config.CONVERSION_RULES):
        autograph_config.CONVERSION_RULES = (rule, *autograph_config.CONVERSION_RULES)


trace_without_autograph()


# --- layers --------------------------------------------------------------------------------

def sublayers(layer):
    """Every layer inside `layer` (itself excluded), at any depth: those a functional model
    lists, and those held as attributes (a `Bidirectional`'s two directions, an
    `ElmoEmbedding`'s backbone).

    Private: `Layer._flatten_layers`. Keras 3 has no public recursive walk (`Model.layers` is
    one level deep) (no upstream issue found)."""
    return list(layer._flatten_layers(include_self=False, recursive=True))


def run_graph(model, inputs, call):
    """The outputs of functional `model`'s graph run on `inputs` (a structure like
    `model.input`'s), each node computed by `call(layer, *args, **kwargs)` instead of
    `layer(*args, **kwargs)`: on Keras tensors, the model's own layers re-wired into another
    model, one of them fed tensors that are not among `inputs` (`FrozenBiLMHead`).

    Private: `Function._run_through_graph`. The public `keras.models.clone_model(...,
    call_function=)` does the same walk but builds a model of `inputs` alone, which refuses a
    layer fed from elsewhere as a graph disconnected (no upstream issue found)."""
    return model._run_through_graph(inputs, operation_fn=lambda layer: layer, call_fn=call)


def keep_input_dtypes(layer):
    """Makes Keras pass `layer`'s call arguments as they come, not cast to the layer's dtype
    (so that a wrong dtype meets the layer's own, clear error).

    Private: `Layer._convert_input_args`. Keras 3 casts a layer's inputs to its compute dtype
    and has no public switch for one layer (no upstream issue found)."""
    layer._convert_input_args = False


def track_variable(layer, variable):
    """Adds an existing `keras.Variable` to `layer`'s weights (trainable or not, as the
    variable is), as `add_weight` does for the variables it creates.

    Private: `Layer._track_variable`. Keras 3's public `add_weight` only creates variables,
    and a SavedModel's variables already exist (no upstream issue found)."""
    layer._track_variable(variable)


def loading_safely(safe_mode=None):
    """Whether a layer's `from_config` runs under Keras's safe mode (the default of
    `keras.saving.load_model`): `safe_mode` when given, else the loading call's mode, else
    True, as Keras's own `TFSMLayer.from_config` decides it.

    Private: `keras.src.saving.serialization_lib.in_safe_mode`. Keras 3 has no public way for
    a layer's `from_config` to read the mode it is loaded under (only its setter,
    `keras.config.enable_unsafe_deserialization`) (no upstream issue found)."""
    from keras.src.saving import serialization_lib

    mode = safe_mode if safe_mode is not None else serialization_lib.in_safe_mode()
    return mode is not False


class AnyBackboneOf:
    """A task class's `backbone_cls` that matches every subclass of `base`: KerasHub finds the
    task class of a preset by its backbone's class (`keras_hub.models.TextClassifier
    .from_preset(dir)`: `find_subclass` keeps the subclasses whose `backbone_cls ==` the
    preset's), one task class per backbone class. elmo-tf's tasks take any backbone that honours
    the backbone contract, so one task class serves every family.

    Not private, but a convention: KerasHub compares `backbone_cls` with `==` (find_subclass,
    `Task.from_preset`) and `is` (a preset's metadata lists the tasks whose `backbone_cls is`
    the backbone's class: ours are not listed). A KerasHub with a per-task registry of
    compatible backbones would make it unnecessary (no upstream issue found).

    Example:
    >>> AnyBackboneOf(Backbone) == ElmoBackbone
    True
    """

    def __init__(self, base):
        self.base = base

    def __eq__(self, other):
        if isinstance(other, AnyBackboneOf):
            return other.base is self.base
        if not isinstance(other, type):
            return NotImplemented
        return issubclass(other, self.base)

    def __hash__(self):
        return hash(self.base)

    def __repr__(self):
        return f"AnyBackboneOf({self.base.__name__})"


@contextlib.contextmanager
def saved_as_untrainable(variables):
    """While the block runs, the TensorFlow variables behind the Keras `variables` say they are
    not trainable, so that a SavedModel written in it records them so (its `SavedVariable`'s
    `trainable`): `keras.layers.TFSMLayer(..., trainable=True)` then trains only the others,
    as `hub.KerasLayer` does (it reads the export's `trainable_variables`). A frozen Keras layer
    leaves its variables' TensorFlow `trainable` True (Keras 3 filters them in the layer, and a
    `tf.Variable` takes the flag only when it is made), and `tf.saved_model.save` writes that
    flag: hence the private `_trainable`. A Keras variable whose freezing reached its
    `tf.Variable` would make this unnecessary. Under a `tf.distribute` strategy, each
    replica's copy says so (a distributed variable's `trainable` is its first copy's)."""
    with attribute_set([part for v in variables for part in _tf_variables(v)],
                       "_trainable", False):
        yield


def _tf_variables(variable):
    """The `tf.Variable`s behind a Keras variable (or a TensorFlow one): one, or a distributed
    variable's copies, one per replica."""
    value = getattr(variable, "_value", variable)
    if isinstance(value, tf.distribute.DistributedValues):
        return list(value.values)
    return [value]


@contextlib.contextmanager
def attribute_set(objects, name, value):
    """While the block runs, attribute `name` of each of `objects` is `value`; each gets its
    own back afterwards, whatever happens in the block.

    Example:
    >>> with attribute_set(lstm_layers, "use_cudnn", False):
    ...     tf.saved_model.save(module, path)
    """
    before = [getattr(o, name) for o in objects]
    try:
        for o in objects:
            setattr(o, name, value)
        yield
    finally:
        for o, old in zip(objects, before):
            setattr(o, name, old)


def preset_has_file(loader, name):
    """Whether the preset a KerasHub `PresetLoader` reads (a directory, or a hub handle) holds
    the file `name`: for `TaskPreprocessor._add_missing_kwargs`, KerasHub's hook for a
    preprocessor made from a preset that holds none (its docstring invites the override),
    where the tokenizer is optional. A public `check_file_exists` in KerasHub would make this
    unnecessary."""
    from keras_hub.src.utils.preset_utils import check_file_exists

    return check_file_exists(loader.preset, name)


# --- models: fit (its progress; under distribution strategies) ----------------------------

def progress_verbosity(verbose="auto"):
    """The `verbose` to give Keras's `fit` and `Progbar`: `"auto"` is 1 (a bar redrawn in
    place) on a terminal or in a notebook, and 2 where the output goes to a file or a pipe (one
    plain line per epoch of `fit`; a `Progbar` writes its line when it finishes); any other
    value is returned as it is.

    Why: Keras 3.15's `Progbar` takes every POSIX process for a terminal (`"posix" in
    sys.modules`), so a redirected log fills with ANSI colours, backspaces and carriage
    returns. Upstream fix that would retire this: `Progbar` asking `sys.stdout.isatty()` only.

    Example:
    >>> model.fit(dataset, epochs=3, verbose=progress_verbosity())
    """
    if verbose != "auto":
        return verbose
    terminal = getattr(sys.stdout, "isatty", lambda: False)()  # (None under pythonw)
    return 1 if terminal or "ipykernel" in sys.modules else 2


class Progress(keras.utils.Progbar):
    """Keras's `Progbar` with `progress_verbosity`'s choice of `verbose`; where that is one
    plain line at the end (a file or a pipe: a batch job's log), also a plain line every
    `every` seconds while it runs, so that a long pass shows how far it got, where Keras's
    own lines go (`io_utils.print_msg`: absl's log when
    `keras.config.disable_interactive_logging()` was called). Reads the bar's private start
    time (`_start`). Upstream change that would retire it: `Progbar(verbose=2)` printing at an
    interval, not only when it ends.

    Example:
    >>> bar = Progress(len(sentences), unit_name="sentence")
    >>> bar.add(64)   # in a log, after a minute: `64/10000 sentences - 61s so far`
    """

    def __init__(self, target, unit_name="step", verbose="auto", every=60.0):
        super().__init__(target, unit_name=unit_name, verbose=progress_verbosity(verbose))
        self.every = every
        self._said = time.monotonic()

    def update(self, current, values=None, finalize=None):
        super().update(current, values=values, finalize=finalize)
        ended = (self.target is not None and current >= self.target) if finalize is None else \
            finalize
        now = time.monotonic()
        if self.verbose == 2 and not ended and now - self._said >= self.every:
            self._said = now
            total = "" if self.target is None else f"/{self.target}"
            io_utils.print_msg(f"{current}{total} {self.unit_name}s - "
                               f"{time.time() - self._start:.0f}s so far")


def in_multi_worker_mode(strategy):
    """Whether `strategy` spans several workers (a MultiWorkerMirroredStrategy with a cluster,
    not one running alone).

    Private: `StrategyExtended._in_multi_worker_mode`; TensorFlow has no public equivalent."""
    return bool(strategy.extended._in_multi_worker_mode())


class FitWorkarounds:
    """Mixin for a `keras.Model` trained with `fit` (first among the bases). Three Keras
    behaviours it corrects:

    * Keras builds a model symbolically from a data batch when `fit` starts, even a model that
      is built; under a strategy it averages the replicas' batches first, int inputs across
      workers too (keras-team/keras#20329), which fails on strings, and under
      MirroredStrategy it rebuilt models whose graph parts it took for unbuilt. Here a model
      whose layers and compiled loss and metrics are all built is not built again, and the
      others build from the first replica's batch. Private: `Model._maybe_symbolic_build`.
    * Without a strategy Keras builds nothing before the first step: an unbuilt model, the
      compiled metrics and the optimizer's slots are created while TensorFlow traces the
      step, which then traces it again (a function that creates variables is traced twice;
      Keras defers the build there for backward compatibility, `trainer.py`'s
      `_maybe_symbolic_build`). Here the model and its metrics are built first, as under a
      strategy, and the optimizer when a training step is made (`evaluate` builds none): the
      step is traced once. Private: `Model._symbolic_build`.
    * Under multi-worker training Keras reduces the step logs with a mean over axis 0, which
      fails on scalars (keras-team/keras#20585): the logs are given shape `[1]` there.
    """

    def make_train_function(self, force=False):
        # The optimizer's slots before the training step's first trace (`fit`,
        # `train_on_batch`; not `evaluate`, which needs none): created in it, TensorFlow
        # would trace the step twice.
        if getattr(self, "optimizer", None) is not None and not self.optimizer.built \
                and self._layers_built():
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force)

    def train_step(self, data):
        return _multi_worker_logs(super().train_step(data))

    def test_step(self, data):
        return _multi_worker_logs(super().test_step(data))

    def _layers_built(self):
        return all(layer.built for layer in self._flatten_layers())

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        layers_built = self._layers_built()
        compiled = [getattr(self, name, None) for name in ("_compile_metrics", "_compile_loss")]
        if layers_built and all(c is None or c.built for c in compiled):
            iterator = data_batch = None
        if getattr(self, "_distribute_strategy", None) is None:
            # Without a strategy Keras builds nothing before the step's first trace, and
            # TensorFlow traces a function that creates variables twice. A model or compiled
            # metrics not yet built are built here, as under a strategy (a compiled loss of
            # one output, as every model here has, creates none; the optimizer:
            # `make_train_function`).
            metrics = getattr(self, "_compile_metrics", None)
            if not layers_built or (metrics is not None and not metrics.built):
                # Keras's build makes the optimizer's slots too: not for an evaluation.
                optimizer, self.optimizer = getattr(self, "optimizer", None), None
                try:
                    self._symbolic_build(iterator=iterator, data_batch=data_batch)
                finally:
                    self.optimizer = optimizer
            return
        if iterator is not None:
            # Keras averages the replicas' batches into one to build from, which fails on
            # strings (a task model's raw text); any replica's batch has the shapes: the first.
            # (Keras resets the iterator after the build: no batch is lost.)
            local = self._distribute_strategy.experimental_local_results
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(
                    lambda x: local(x)[0] if isinstance(x, tf.distribute.DistributedValues)
                    else x, next(batches))
                break
            iterator = None
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


def _multi_worker_logs(logs):
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) \
            and in_multi_worker_mode(strategy):
        return {name: tf.reshape(value, [1]) for name, value in logs.items()}
    return logs


def track_loss(model, loss, weight):
    """Updates `model`'s loss metric (`loss` in the logs) with one replica's `loss`, weighted
    by `weight` (Keras's own steps weigh a batch by its rows; `CompiledStep.loss_weight`).

    Private: `Trainer._loss_tracker` and `keras.src.losses.loss.unscale_loss_for_distribution`
    (the replica's loss is its share of the global batch's; the tracker wants the mean). A
    custom `train_step` has no public way to feed Keras's loss metric (no upstream issue
    found)."""
    model._loss_tracker.update_state(unscale_loss_for_distribution(loss), sample_weight=weight)


# --- optimizers ------------------------------------------------------------------------------

class SummedGradientsHook:
    """Mixin for a Keras optimizer (first among the bases): its
    `transform_summed_gradients(grads)` sees the gradients once they are summed over the
    replicas, before the update; with `global_clipnorm`, Keras's own clip (of each replica's
    part, before the sum) is left to it.

    Private: `Optimizer._clip_gradients`, `_backend_update_step` (Keras's TensorFlow update:
    the sum over replicas, `_all_reduce_sum_gradients`, then one update per variable on every
    device, `_distributed_tf_update_step`), and TensorFlow's `maybe_merge_call`. Keras 3 clips
    each replica's gradient before the cross-replica sum and offers no hook after it
    (tensorflow/tensorflow#33929: clipping "after gradients get aggregated" is what users
    expect; it was left to a later optimizer refactoring)."""

    def transform_summed_gradients(self, grads):
        return grads

    def _clip_gradients(self, grads):
        if self.global_clipnorm:
            return grads  # after the cross-replica sum: transform_summed_gradients
        return super()._clip_gradients(grads)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        pairs = list(self._all_reduce_sum_gradients(list(zip(grads, variables))))
        grads = self.transform_summed_gradients([g for g, _ in pairs])
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_tf_update_step, self._distribution_strategy,
            list(zip(grads, (v for _, v in pairs))), learning_rate)


# --- saving ----------------------------------------------------------------------------------

def save_weights_to_h5(model, h5_file):
    """Writes what `model.save_weights` writes (the same Keras layout, read back by
    `model.load_weights`) into an `h5py.File` the caller opened (elmo-tf opens it on a Python
    file object, so that a failed write is an OSError, not HDF5's segfault).

    Private: `saving_lib._save_state` and `H5IOStore`; Keras's public `save_weights` takes a
    path only (keras-team/keras#14411, open: saving to a file object)."""
    saving_lib._save_state(model, weights_store=_OpenH5Store(h5_file), assets_store=None,
                           inner_path="", visited_saveables=set())


class _OpenH5Store(saving_lib.H5IOStore):
    """Keras's HDF5 weights store on an `h5py.File` opened by the caller."""

    def __init__(self, h5_file):
        self._open_file = h5_file
        super().__init__(io.BytesIO(), mode="w")  # a path-or-io its constructor accepts

    def _get_h5_file(self, path_or_io, mode=None):
        return self._open_file


@contextlib.contextmanager
def without_optimizer(model):
    """`model` as Keras's saving and loading see it without its optimizer, for the block: no
    optimizer state written (`save_weights`, `.keras` archives) or read (`load_weights`), no
    compile config (a `.keras` written here loads uncompiled, with no "Skipping variable
    loading for optimizer" warning). The optimizer is back after the block.

    Private: the Trainer's `optimizer` and `compiled` attributes, which Keras's writers read
    (keras-team/keras has no public way to save a compiled model without its optimizer).

    Example:
    >>> with without_optimizer(model):
    ...     model.save_weights("best.weights.h5")   # the model's weights, no Adam slots
    """
    if getattr(model, "optimizer", None) is None:  # never compiled: nothing to leave out
        yield model
        return
    optimizer, compiled = model.optimizer, model.compiled
    model.optimizer, model.compiled = None, False
    try:
        yield model
    finally:
        model.optimizer, model.compiled = optimizer, compiled


# --- SavedModels -----------------------------------------------------------------------------

def trackable_object():
    """An empty object whose attributes `tf.saved_model.save` tracks and saves, attributes
    named `variables` and `trainable_variables` included (TF Hub's reusable SavedModel API).

    Private: `tf.__internal__.tracking.AutoTrackable`; the public `tf.Module` reserves those two
    names as properties (no upstream issue found)."""
    return tf.__internal__.tracking.AutoTrackable()


def saved_model_graphs(saved_model_dir):
    """The `GraphDef`s of the SavedModel in `saved_model_dir` (one per meta graph), read from
    its `saved_model.pb` without loading it (a graph that needs a library's ops is read all
    the same).

    Private: `tensorflow.core.protobuf.saved_model_pb2`, the generated protocol buffer module;
    `tf.saved_model.load` would need every op registered (no upstream issue found)."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return [meta_graph.graph_def for meta_graph in saved_model.meta_graphs]


def kernel_device_types(op):
    """The device types (`"CPU"`, `"GPU"`, `"DEFAULT"`, ...) that this TensorFlow has kernels
    of `op` for.

    Private: `tensorflow.python.framework.kernels.get_registered_kernels_for_op` (no upstream
    issue found)."""
    return {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}


# --- TensorFlow runtime ----------------------------------------------------------------------

def in_xla_compilation():
    """Whether the graph being traced is compiled by XLA: a `tf.function(jit_compile=True)`
    (Keras's `jit_compile`, `CompiledStep`'s per-replica step), or a loop or function inside
    one.

    Private: `tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext`; there is no
    public way to ask while tracing (no upstream issue found)."""
    return (not tf.executing_eagerly()
            and control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def gradients_may_be_taken():
    """Whether a `tf.GradientTape` is recording what runs or is traced here (Keras's training
    step has one; `predict`, `embed` and serving do not).

    Private: `tensorflow.python.eager.record.could_possibly_record`; there is no public way to
    ask (no upstream issue found). Used only to choose the cheaper of two equally correct
    paths: without a tape, the LSTM loop keeps nothing for a backward pass."""
    return record.could_possibly_record()


def eager_device_scope():
    """The device name of the innermost `tf.device` scope around an eager call (`""` outside
    any).

    Private: `tensorflow.python.eager.context.context().device_name`; eager code has no public
    way to read its device scope (a graph reads it from an op's `device`) (no upstream issue
    found)."""
    return context.context().device_name or ""
