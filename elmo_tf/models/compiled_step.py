"""`CompiledStep`: every task's training step with XLA per replica, under any strategy."""

import types

import keras
import tensorflow as tf

from elmo_tf.keras_compat import sublayers, track_loss

XLA_MODES = ("auto", "on", "off")


def use_xla(mode, strategy=None, cpus=False):
    """Whether training compiles each replica's step with XLA: `"on"`, `"off"`, or `"auto"`:
    on when the replicas are GPUs (with or without a strategy; `strategy`: the one in scope by
    default), and on CPU replicas where the caller says that compiling pays off there
    (`cpus`). Pre-training does for runs long enough to win back the compilation
    (`elmo_tf.training.pretraining.xla_pays_off_on_cpus`); fine-tuning does not (a frozen
    probe's whole run took 1.5x to 3x as long with XLA on an AMD EPYC: `docs/benchmarks.md`).

    Example:
    >>> use_xla("auto")   # True on a machine with a GPU
    >>> use_xla("auto", cpus=True)   # True on CPUs too
    """
    check_xla_mode(mode)
    if mode != "auto":
        return mode == "on"
    strategy = strategy or tf.distribute.get_strategy()
    try:
        devices = [device.upper() for device in strategy.extended.worker_devices]
    except RuntimeError:  # the default strategy: one device, a GPU if there is one
        devices = ["GPU" if tf.config.list_logical_devices("GPU") else "CPU"]
    if all("GPU" in device for device in devices):
        return True
    return bool(cpus) and not any("GPU" in device for device in devices)


def check_xla_mode(mode):
    """Raises a ValueError naming the accepted modes unless `mode` is one of `XLA_MODES`."""
    if mode not in XLA_MODES:
        raise ValueError(f"xla must be one of {list(XLA_MODES)}; got {mode!r}.")


def _would_run_cudnn(layer):
    """Whether `layer` is a Keras LSTM or GRU that takes cuDNN's kernel (`use_cudnn="auto"`
    where a GPU can run it), which XLA cannot compile (Keras then sets `supports_jit = False`)."""
    return (isinstance(layer, (keras.layers.LSTM, keras.layers.GRU))
            and layer.use_cudnn == "auto" and not layer.supports_jit)


class CompiledStep:
    """Mixin for a `keras.Model` (after `FitWorkarounds` among the bases, before the model
    class): with `xla` on, its training step compiles each replica's forward and backward pass
    with XLA, under no strategy, `MirroredStrategy` and `MultiWorkerMirroredStrategy` alike.

    Keras 3 compiles the whole cross-replica step with `jit_compile=True`, which XLA cannot do
    with mirrored variables (keras-team/keras#19005), so it turns XLA off under a strategy.
    Here the compiled part is a pure function of values: the variables are read before it, in
    the replica's context, and passed in (a `keras.StatelessScope` maps each variable to its
    value inside); it returns the gradients and the new values of the state it changed (the
    carried LSTM state, the metrics, seed generators), which are assigned after it. The
    gradients' sum over the replicas, the global-norm clip and the optimizer update
    (`SparseAdagrad`'s and `Adam`'s row-sparse updates) stay outside, as in Keras's own step.
    Cross-replica ops cannot run inside a compiled function: a loss that divides by a count of
    the whole global batch gets it from `global_loss_counts(x, y)`, computed before the compiled
    part and passed in as `compute_loss(..., loss_counts=...)`.

    Without a strategy the model is also compiled with Keras's `jit_compile=True`, so that the
    update and the evaluation compile too (one device holds every variable), where every layer
    compiles: a task whose preprocessor hashes words (string ops, run in the input pipeline; a
    `TextClassifier` with `word_embedding_dim`, `finetune`'s default) compiles the per-replica
    part only, as under a strategy.

    Set by `compile(..., xla=...)`.
    """

    xla = False

    def compile(self, *args, xla=None, **kwargs):
        """`keras.Model.compile`, and `xla`: compile each replica's training step with XLA
        (see the class): True or `"on"`, False or `"off"`, or `"auto"` (the default:
        `use_xla`, on when the replicas are GPUs and every layer compiles). Keras's
        `jit_compile` is taken as another name for it. Compiled, Keras's LSTM and GRU layers
        that would run cuDNN's kernel (which XLA cannot compile) run Keras's own, from then
        on (also where this model shares them with another)."""
        jit_compile = kwargs.pop("jit_compile", None)
        if xla is not None and jit_compile is not None and jit_compile != xla:
            raise ValueError(f"xla={xla!r} and jit_compile={jit_compile!r} disagree: give "
                             "xla alone (it replaces Keras's jit_compile, which a "
                             "distribution strategy turns off).")
        xla = next((v for v in (xla, jit_compile) if v is not None), "auto")
        mode = {True: "on", False: "off"}.get(xla, xla)
        incompatible = self.xla_incompatible_layers()
        self.xla = use_xla(mode) and (mode == "on" or not incompatible)
        if self.xla and incompatible:
            raise ValueError(
                f"{type(self).__name__} ({self.name}) cannot compile its training step with "
                f"XLA: its layers {incompatible} run ops XLA cannot compile (string ops: a "
                "layer called on raw text or string tokens says so for good); compile it with "
                "xla=False (finetune: --xla off).")
        # Keras's LSTM and GRU say they do not compile where they would run cuDNN's kernel
        # (a GPU); compiled, they run Keras's own kernel instead, which compiles, for the rest
        # of the process (a cuDNN kernel is faster where XLA is off).
        for layer in self._computed_layers() if self.xla else ():
            if _would_run_cudnn(layer):
                layer.use_cudnn, layer.supports_jit = False, True
        # (Asked of a model with a layer that does not compile, Keras warns "Model doesn't
        # support `jit_compile=True`" and turns it off.)
        whole = not tf.distribute.has_strategy() and all(
            layer.supports_jit for layer in [self, *sublayers(self)])
        super().compile(*args, jit_compile=self.xla and whole, **kwargs)
        # One trace per input signature (a new shape compiles once), kept in a plain
        # namespace: not tracked, not saved with the model.
        self._xla_step = types.SimpleNamespace(
            gradients=tf.function(self._gradients, jit_compile=True, autograph=False))

    def get_compile_config(self):
        config = super().get_compile_config()
        return {**config, "xla": bool(self.xla)} if config else config

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (Keras skips a model whose `compile` is
        its own)."""
        config = keras.saving.deserialize_keras_object(config)
        config.pop("jit_compile", None)
        self.compile(**config)  # "xla" as saved
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    def xla_incompatible_layers(self):
        """The names of this model's layers that say they do not compile with XLA
        (`supports_jit = False`: string ops), a KerasHub task's preprocessor left out, but for
        Keras's LSTM and GRU layers that would run cuDNN's kernel: compiled, they run their
        own (`compile`)."""
        return [layer.name for layer in self._computed_layers()
                if not layer.supports_jit and not _would_run_cudnn(layer)]

    def _computed_layers(self):
        """The layers the model's step computes: all of them but a KerasHub task's
        preprocessor's, which runs in the input pipeline."""
        preprocessor = getattr(self, "preprocessor", None)
        skipped = {id(layer) for layer in ([preprocessor, *sublayers(preprocessor)]
                                           if preprocessor is not None else [])}
        return [layer for layer in sublayers(self) if id(layer) not in skipped]

    def global_loss_counts(self, x, y):
        """Counts of the whole global batch that the loss divides by (summed over the replicas
        here, outside the compiled part), or None when the loss needs none."""
        return None

    @staticmethod
    def summed_over_replicas(counts):
        """`counts` (a nest of tensors) summed over the replicas of the strategy in scope (as
        they are without one): what `global_loss_counts` returns."""
        context = tf.distribute.get_replica_context()
        if context is None:
            return counts
        return context.all_reduce(tf.distribute.ReduceOp.SUM, counts)

    def loss_weight(self, x, counts):
        """What one replica's batch loss weighs in the `loss` metric (Keras's running mean of
        the batch losses, `loss` and `val_loss` in the logs): its rows, as in Keras's own
        steps. A loss that is a mean over a count of the global batch (`global_loss_counts`)
        weighs that count instead, so that the metric is the mean over everything counted:
        for a language model, the per-token cross-entropy whose exponential is its
        perplexity, whatever the batches' lengths and padding."""
        return tf.shape(next(i for i in tf.nest.flatten(x) if i is not None))[0]

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        counts = self.global_loss_counts(x, y)
        if not self.xla:
            if counts is None:
                return super().train_step(data)
            return self._train_step(x, y, sample_weight, counts)
        trainable = self.trainable_variables
        state = self._state_variables()
        loss_scale = self.optimizer.scale_loss(tf.constant(1.0))  # mixed float16's, or 1
        # Values read here, in the replica's context: the compiled part holds no variable.
        # Without a strategy Keras compiles this whole step: the part is traced into it, not
        # compiled on its own as well.
        part = self._gradients if self.jit_compile else self._xla_step.gradients
        gradients, updates, y_pred = part(
            [tf.convert_to_tensor(v.value) for v in trainable],
            [tf.convert_to_tensor(v.value) for v in state], x, y, sample_weight, counts,
            loss_scale)
        for index, value in updates.items():
            state[int(index)].assign(value)
        self.optimizer.apply_gradients(zip(self.replica_gradients(gradients, trainable),
                                           trainable))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def replica_gradients(self, gradients, variables):
        """A replica's compiled gradients (of `variables`) as the optimizer sums them over the
        replicas: as they are here (a row-sparse gradient stays sparse, as a lazy optimizer
        needs it, when the replicas' batches have one shape, as a language model's always
        do)."""
        return gradients

    def _train_step(self, x, y, sample_weight, counts):
        """Keras's training step, with the loss metric weighted by `loss_weight`."""
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                     training=True, loss_counts=counts)
            track_loss(self, loss, self.loss_weight(x, counts))
            scaled = self.optimizer.scale_loss(loss)
        trainable = self.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(scaled, trainable), trainable))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def test_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        counts = self.global_loss_counts(x, y)
        if counts is None:
            return super().test_step(data)
        y_pred = self(x, training=False)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                 training=False, loss_counts=counts)
        track_loss(self, loss, self.loss_weight(x, counts))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def _gradients(self, trainable_values, state_values, x, y, sample_weight, counts,
                   loss_scale):
        trainable = self.trainable_variables
        state = self._state_variables()
        mapping = list(zip(trainable, trainable_values)) + list(zip(state, state_values))
        with tf.GradientTape() as tape:
            tape.watch(trainable_values)
            with keras.StatelessScope(state_mapping=mapping) as scope:
                before = [scope.get_current_value(v) for v in state]
                y_pred = self(x, training=True)
                extra = {} if counts is None else {"loss_counts": counts}
                loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                         training=True, **extra)
                track_loss(self, loss, self.loss_weight(x, counts))
            scaled = loss * tf.cast(loss_scale, loss.dtype)
        gradients = tape.gradient(scaled, trainable_values)
        # Only the state that changed goes back (a mirrored variable, a seed generator's,
        # cannot take a value per replica; the LSTM state and the metrics are per replica).
        updates = {str(i): scope.get_current_value(v) for i, (v, old) in
                   enumerate(zip(state, before)) if scope.get_current_value(v) is not old}
        return gradients, updates, y_pred

    def _state_variables(self):
        """The variables the step may change besides the trainable ones (each once, in a fixed
        order: the compiled part returns their new values by index)."""
        return list({id(v): v for v in self.non_trainable_variables
                     + self.metrics_variables}.values())
