"""`SavedModelEmbedding`: an exported ELMo SavedModel as a fine-tunable Keras 3 layer."""

import os
import re

import keras
import tensorflow as tf

from elmo_tf.keras_compat import loading_safely, track_variable
from elmo_tf.ops.padding import token_mask


@keras.saving.register_keras_serializable(package="elmo_tf")
class SavedModelEmbedding(keras.layers.Layer):
    """String tokens `[batch, time]` -> the `elmo` output of an exported ELMo, with a mask.

    Loads a SavedModel written by `elmo_tf.export.export_saved_model` (or `elmo-tf export`)
    through its reusable API, `__call__(tokens, training)`, and tracks its variables as Keras
    variables, so optimizers such as Adam update the SavedModel's own variables (plain
    `keras.layers.TFSMLayer` cannot: optimizer slot names built from `name:0` are rejected).
    Which variables may train was decided at export (the scalar mix, plus the biLM if the export
    fine-tunes it); `trainable=False` freezes them all. Nothing of elmo_tf's own model code runs:
    the graph comes from the SavedModel. Prefer `ElmoEmbedding.from_saved_model`.

    Saving a model that contains this layer to `.keras` stores the path (it must still exist when
    the model is loaded) and the fine-tuned values. Loading such a `.keras` file loads the
    SavedModel it names, whose graph may run any TensorFlow op: as Keras's own `TFSMLayer`,
    it is refused in Keras's safe mode (`keras.saving.load_model`'s default), with the same
    message and the same way out (`safe_mode=False` for a file you trust).

    Args:
        saved_model_dir: the SavedModel version directory (e.g. `serving/elmo/1`).
        trainable: train the variables the export marked trainable.

    Example:
    >>> elmo = ElmoEmbedding.from_saved_model("serving/elmo/1")
    >>> tokens = keras.Input(shape=(None,), dtype="string")
    >>> model = keras.Model(tokens, keras.layers.GlobalAveragePooling1D()(elmo(tokens)))
    """

    def __init__(self, saved_model_dir, trainable=True, **kwargs):
        super().__init__(trainable=trainable, **kwargs)
        self.saved_model_dir = os.fspath(saved_model_dir)
        self._module = tf.saved_model.load(self.saved_model_dir)
        for attribute in ("__call__", "variables", "trainable_variables"):
            if not hasattr(self._module, attribute):
                raise ValueError(f"{self.saved_model_dir} lacks the reusable SavedModel API "
                                 f"({attribute!r}); export it with elmo_tf.export.")
        trainable_ids = {id(v) for v in self._module.trainable_variables}
        self._loaded = []
        for variable in self._module.variables:
            # The same tf.Variable, as a Keras variable with a name optimizers accept.
            wrapped = keras.Variable(
                initializer=variable, trainable=id(variable) in trainable_ids,
                dtype=variable.dtype, shape=variable.shape,
                name=re.sub(r"[^A-Za-z0-9_.-]", "_", variable.name.split(":")[0]))
            track_variable(self, wrapped)
            self._loaded.append(wrapped)
        self.supports_masking = True
        self.supports_jit = False  # string ops
        self.built = True

    def call(self, tokens, training=None):
        if isinstance(tokens, tf.RaggedTensor):
            tokens = tokens.to_tensor(default_value="")
        if self.trainable:  # the export's L2 penalty on the mix, as hub.KerasLayer applies it
            for penalty in self._module.regularization_losses:
                self.add_loss(penalty())
        return self._module(tf.convert_to_tensor(tokens), training=bool(training))

    def compute_mask(self, tokens, mask=None):
        return token_mask(tokens)

    def compute_output_shape(self, input_shape):
        width = self._module.signatures["tokens"].structured_outputs["elmo"].shape[-1]
        return tuple(input_shape[:2]) + (width,)

    def get_config(self):
        config = super().get_config()
        config["saved_model_dir"] = self.saved_model_dir
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None, safe_mode=None):
        """The layer of a `.keras` config, refused in safe mode (see the class)."""
        if loading_safely(safe_mode):
            raise ValueError(
                f"Requested the deserialization of a `{cls.__name__}`, which loads an external "
                f"SavedModel ({config.get('saved_model_dir')}). This carries a potential risk "
                "of arbitrary code execution and thus it is disallowed by default. If you "
                "trust the source of the artifact, you can override this error by passing "
                "`safe_mode=False` to the loading function, or calling "
                "`keras.config.enable_unsafe_deserialization()`.")
        return cls(**config)
