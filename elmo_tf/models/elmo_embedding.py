"""`ElmoEmbedding`: ELMo vectors as a layer of a downstream Keras model."""

import keras

from elmo_tf.checks import check_positive_ints
from elmo_tf.text.char_ids import as_tensor, is_strings
from elmo_tf.layers.projected_lstm import removed_implementation
from elmo_tf.layers.remove_sentence_boundaries import RemoveSentenceBoundaries
from elmo_tf.layers.scalar_mix import ScalarMix
from elmo_tf.layers.tokens_to_char_ids import TokensToCharIds
from elmo_tf.models.backbone import Backbone, with_backbone_object
from elmo_tf.models.load_backbone import load_backbone


# The backbone's outputs the embedding mixes, which it also takes in place of tokens.
GIVEN = ("layers_with_boundaries", "mask_with_boundaries")


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoEmbedding(keras.layers.Layer):
    """Tokens -> ELMo representations `[batch, time, 2P]`, with a Keras mask.

    AllenNLP's `Elmo` module on any `Backbone` (ELMo's `ElmoBackbone`, or any model that keeps
    the backbone contract, as AllenNLP's `Elmo(module=...)`): each of
    `num_output_representations` scalar mixes combines the backbone's layers on the grid that
    includes `<S>`/`</S>` (so layer-norm statistics include them, as in AllenNLP), the
    boundaries are removed, and dropout is applied.

    Input (through `TokensToCharIds`): string tokens `[batch, time]` padded with `""`, a
    `tf.RaggedTensor` of strings, nested lists of `str`, or int32 char ids `[batch, time, 50]`
    as `elmo_tf.tokens_to_char_ids` makes them. Or the backbone's outputs, computed before
    (a frozen biLM's are the same at every epoch: `elmo-tf finetune` computes them once):
    `{"layers_with_boundaries": [batch, layers, time + 2, dim], "mask_with_boundaries":
    [batch, time + 2]}`, right-padded, as the backbone returns them; the mixes run on them.

    Args:
        backbone: a `Backbone`, e.g. an `ElmoBackbone`.
        num_output_representations: independent scalar mixes (one per use in the task model);
            with more than one the layer returns a list.
        scalar_mix_parameters: fixed pre-softmax mix weights (one per biLM layer); the mix is then
            not trainable and gamma stays 1, as in AllenNLP.
        do_layer_norm: normalise each biLM layer before mixing (batch-global statistics).
        dropout: dropout on each representation in training (AllenNLP's default 0.5).
        l2_coef: bilm-tf's L2 penalty on the mix weights, or None.
        fine_tune: train the biLM's weights too (frozen by default, and then no gradient is
            computed through it: `backbone_outputs`; the mixes always train unless
            `scalar_mix_parameters` fixes them).

    Example:
    >>> elmo = ElmoEmbedding.from_allennlp("options.json", "weights.hdf5", dropout=0.0)
    >>> tokens = keras.Input(shape=(None,), dtype="string")
    >>> logits = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(elmo(tokens)))
    >>> model = keras.Model(tokens, logits)
    """

    def __init__(self, backbone, num_output_representations=1, scalar_mix_parameters=None,
                 do_layer_norm=False, dropout=0.5, l2_coef=None, fine_tune=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(backbone, Backbone):
            raise TypeError(f"backbone must be an elmo_tf Backbone (ElmoBackbone, or any model "
                            f"that keeps the Backbone contract); got {type(backbone).__name__}.")
        check_positive_ints(num_output_representations=num_output_representations)
        self.backbone = backbone
        self.fine_tune = fine_tune  # sets backbone.trainable (the backbone is this layer's own)
        self.num_output_representations = int(num_output_representations)
        self.scalar_mix_parameters = (None if scalar_mix_parameters is None
                                      else [float(v) for v in scalar_mix_parameters])
        self.do_layer_norm = bool(do_layer_norm)
        self.dropout = float(dropout)
        self.l2_coef = None if l2_coef is None else float(l2_coef)
        self.preprocessor = TokensToCharIds(backbone.max_characters_per_token)
        self.remove_boundaries = RemoveSentenceBoundaries(time_axis=1, dtype=self.dtype_policy)
        self.scalar_mixes = [
            ScalarMix(backbone.num_layers, do_layer_norm=do_layer_norm,
                      initial_scalar_parameters=self.scalar_mix_parameters, l2_coef=l2_coef,
                      dropout=dropout, trainable=scalar_mix_parameters is None,
                      dtype=self.dtype_policy, name=f"scalar_mix_{i}")
            for i in range(self.num_output_representations)]
        self.supports_masking = True

    @property
    def fine_tune(self):
        """Whether the biLM trains with the rest (while this layer is trainable)."""
        return self._fine_tune

    @fine_tune.setter
    def fine_tune(self, value):
        self._fine_tune = bool(value)
        _set_trainable(self.backbone, self.trainable and self._fine_tune)

    @property
    def trainable(self):
        return keras.layers.Layer.trainable.fget(self)

    @trainable.setter
    def trainable(self, value):
        # Keras sets `trainable` on every sub-layer; the biLM follows `fine_tune` instead, so
        # `model.trainable = True` on a parent model does not unfreeze it.
        keras.layers.Layer.trainable.fset(self, value)
        if hasattr(self, "_fine_tune"):
            _set_trainable(self.backbone, bool(value) and self._fine_tune)

    @classmethod
    def from_allennlp(cls, options_file, weight_file, stateful=False, max_batch_size=128,
                      **kwargs):
        """An `ElmoEmbedding` on the backbone of `options_file` and `weight_file`
        (`elmo_tf.models.load_backbone`: ELMo's, or Masked ELMo's).

        `stateful` and `max_batch_size` go to the backbone (ELMo's only: Masked ELMo is
        stateless), `dtype` to both, the other keyword arguments to `ElmoEmbedding`.
        """
        kwargs = removed_implementation(kwargs)
        backbone = load_backbone(options_file, weight_file, stateful=stateful,
                                 max_batch_size=max_batch_size, dtype=kwargs.get("dtype"))
        return cls(backbone, **kwargs)

    @staticmethod
    def from_saved_model(saved_model_dir, trainable=True, **kwargs):
        """A Keras 3 layer running an exported ELMo SavedModel (`elmo_tf.export`).

        Returns a `SavedModelEmbedding`: string tokens `[batch, time]` in, the export's `elmo`
        output with a mask out, fine-tunable with any Keras optimizer (`trainable=True` trains
        what the export marked trainable: the mix, plus the biLM if it was exported so).
        """
        from elmo_tf.models.saved_model_embedding import SavedModelEmbedding

        return SavedModelEmbedding(saved_model_dir, trainable=trainable, **kwargs)

    def build(self, input_shape):
        for mix in self.scalar_mixes:
            mix.build((None, self.backbone.num_layers, None, self.backbone.output_dim))

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, dict):  # the backbone's outputs
            inputs = self.check_backbone_outputs(inputs)
        else:
            inputs = as_tensor(inputs)  # Keras layers take tensors
            # String tokens go through string ops, which XLA cannot compile; char ids compile
            # (a task model's inputs). Called on strings once, the layer says so for good.
            self.supports_jit = self.supports_jit and not is_strings(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None):
        if isinstance(inputs, dict):  # the backbone's outputs, computed before
            return self.mix(inputs, training)
        return self.mix(self.backbone_outputs(self.preprocessor(inputs), training), training)

    def check_backbone_outputs(self, outputs):
        """`outputs` (the backbone's, given in place of tokens) with its mask as bool; a
        ValueError naming what is wrong unless they are the backbone's `layers_with_boundaries`
        and `mask_with_boundaries` alone, of its layers and width."""
        if sorted(outputs) != sorted(GIVEN):
            raise ValueError(f"an ElmoEmbedding given its backbone's outputs takes {list(GIVEN)};"
                             f" got {sorted(outputs)}.")
        layers = outputs["layers_with_boundaries"]
        expected = (self.backbone.num_layers, self.backbone.output_dim)
        if len(layers.shape) != 4 or tuple(layers.shape[i] for i in (1, 3)) != expected:
            raise ValueError(f"layers_with_boundaries must be [batch, {expected[0]} layers, time "
                             f"+ 2, {expected[1]}] (this backbone's); got shape "
                             f"{tuple(layers.shape)}.")
        mask = outputs["mask_with_boundaries"]
        return {"layers_with_boundaries": layers,
                "mask_with_boundaries": mask if mask.dtype == "bool" else keras.ops.cast(
                    mask, "bool")}

    def backbone_outputs(self, char_ids, training=None):
        """The backbone's outputs for `char_ids` (what `mix` takes), every one with its
        gradient stopped when none of the backbone's variables trains (a frozen biLM). A tape
        watches every `tf.Variable` created trainable, and freezing a Keras layer does not
        change that flag, so without the stop it would differentiate through the frozen LSTM
        loops and char CNN at every training step, for gradients nobody asks for."""
        outputs = self.backbone(char_ids, training=training)
        if any(w.trainable for w in self.backbone.weights):  # a part unfrozen by hand too
            return outputs
        return {name: keras.ops.stop_gradient(value) for name, value in outputs.items()}

    def mix(self, backbone_outputs, training=None):
        """The representations from `backbone_outputs`'s result (for callers that also need
        the backbone's outputs; `backbone_outputs` stops a frozen biLM's gradient)."""
        mask = backbone_outputs["mask_with_boundaries"]
        representations = [
            self.remove_boundaries(mix(backbone_outputs["layers_with_boundaries"], mask=mask,
                                       training=training), mask)[0]
            for mix in self.scalar_mixes]
        return representations[0] if len(representations) == 1 else representations

    def compute_mask(self, inputs, mask=None):
        if isinstance(inputs, dict):  # right-padded: the tokens' mask is the boundaries' shifted
            mask = inputs["mask_with_boundaries"][:, 2:]
        else:
            mask = self.preprocessor.compute_mask(inputs)
        return mask if self.num_output_representations == 1 else [mask] * len(self.scalar_mixes)

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, dict):  # the backbone's outputs
            batch, _, time, _ = input_shape["layers_with_boundaries"]
            input_shape = (batch, None if time is None else time - 2)
        shape = tuple(input_shape[:2]) + (self.backbone.output_dim,)
        return shape if self.num_output_representations == 1 else [shape] * (
            self.num_output_representations)

    def get_config(self):
        config = super().get_config()
        config.update(backbone=keras.saving.serialize_keras_object(self.backbone),
                      num_output_representations=self.num_output_representations,
                      scalar_mix_parameters=self.scalar_mix_parameters,
                      do_layer_norm=self.do_layer_norm, dropout=self.dropout,
                      l2_coef=self.l2_coef, fine_tune=self.fine_tune)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone_object(config))


def _set_trainable(layer, value):
    """`layer.trainable = value`, always down to every sub-layer's variables. The attribute
    assignment does nothing when `layer.trainable` already equals `value` (TensorFlow's tracking
    skips an assignment of the same object), which leaves the sub-layers of a backbone built
    with `trainable=False` (a deserialized one) trainable: the biLM of a loaded model would
    train."""
    keras.layers.Layer.trainable.fset(layer, value)
