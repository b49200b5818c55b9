"""`Backbone`: the contract every elmo-tf backbone keeps, and what its users rely on."""

import json
import os
import types

import keras
import keras_hub
import tensorflow as tf

from elmo_tf.text.char_ids import check_char_ids
from elmo_tf.layers.add_sentence_boundaries import AddSentenceBoundaries
from elmo_tf.layers.remove_sentence_boundaries import RemoveSentenceBoundaries
from elmo_tf.ops.chunking import compute_device_type, shape_bucket
from elmo_tf.ops.padding import check_right_padded

# The outputs every backbone returns, with the axis of each that runs over time, and whether
# that axis is the grid with the sentence boundaries (time + 2).
OUTPUTS = {"layers": (2, False), "mask": (1, False), "layers_with_boundaries": (2, True),
           "mask_with_boundaries": (1, True), "token_embeddings": (1, True)}


class Backbone(keras_hub.models.Backbone):
    """A contextual token encoder: char ids of sentences -> one vector per token and layer.

    This is the contract `ElmoEmbedding` (the scalar mixes), the SavedModel export and
    `elmo-tf dump` rely on, and the only thing they know of a backbone: ELMo's biLM
    (`ElmoBackbone`) keeps it, and so does any other backbone (Masked ELMo's), as AllenNLP's
    `Elmo(module=...)` takes any biLM that returns its activations and mask.

    A backbone is a functional Keras model built in `__init__`, and a KerasHub backbone
    (`keras_hub.models.Backbone`): `save_to_preset(dir)` writes a KerasHub preset, which
    `keras_hub.models.Backbone.from_preset(dir)` loads once `elmo_tf` is imported.

    Input: int32 char ids `[batch, time, max_characters_per_token]` of *sentences*, in
    AllenNLP's `batch_to_ids` convention (`elmo_tf.tokens_to_char_ids`): no sentence
    boundaries, right-padded with all-zero rows.

    Sentence boundaries, the one rule: the backbone wraps every sentence in `<S>` ... `</S>`
    itself (`AddSentenceBoundaries`), runs on that grid, and removes them again from "layers".
    Nothing else adds boundaries to sentences. (Pre-training reads token *streams*, in which
    `<S>` and `</S>` are tokens of the text, packed sentence after sentence by the data
    pipeline; a pre-training task runs its backbone's parts on those streams as they are.)

    Outputs, a dict:
        "layers": float32 `[batch, num_layers, time, output_dim]`: layer 0 the
            context-independent token representation, then one per recurrent layer; zeros
            at padding.
        "mask": bool `[batch, time]`.
        "layers_with_boundaries", "mask_with_boundaries": the same on the `time + 2` grid that
            includes `<S>` and `</S>` (what AllenNLP's scalar-mix layer norm takes its
            statistics over).
        "token_embeddings": float32 `[batch, time + 2, token_dim]`, the token encoder's
            output on that grid.

    Subclasses set, after building the graph: `num_layers` (entries along the layer axis of
    "layers", layer 0 included), `output_dim`, `token_dim`, `max_characters_per_token`, and
    override `stateful`, `max_batch_size` and `reset_states` if they carry state.

    Example:
    >>> backbone = ElmoBackbone.from_allennlp("options.json", "weights.hdf5")
    >>> outputs = backbone.embed(tokens_to_char_ids([["The", "cat"], ["Hi", ""]]))
    >>> outputs["layers"].shape   # [batch, num_layers, time, output_dim]
    TensorShape([2, 3, 2, 1024])
    """

    num_layers: int
    output_dim: int
    token_dim: int
    max_characters_per_token: int

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # `embed`'s functions by device type ("CPU": a graph, "GPU": XLA); in a plain
        # namespace, so that SavedModels do not track them.
        self._embed = types.SimpleNamespace(functions={})

    @property
    def stateful(self):
        """Whether the backbone carries state from one call to the next, per batch row."""
        return False

    @property
    def max_batch_size(self):
        """Rows of kept state of a stateful backbone (None when stateless)."""
        return None

    def reset_states(self):
        """Clears the carried state (a no-op for a stateless backbone)."""

    # --- presets -------------------------------------------------------------------------
    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """A backbone from a preset, as KerasHub's `from_preset`. `preset` is one of:

        * a KerasHub preset (a directory with `config.json`, from `save_to_preset`; or a
          `kaggle://`, `hf://` handle): KerasHub's own loader;
        * a model directory without one (or whose config.json is not Keras's, beside an
          options.json), `options.json` + `weights.hdf5`: what elmo-tf wrote before it wrote
          presets, AllenNLP's released files under those names; any registered family's
          (`load_backbone`). (`elmo-tf train` and `init` write both.)
        * the name of a registered architecture (`elmo_tf.models.family.preset_names()`):
          elmo-tf ships no weights for it, so it takes `load_weights=False`, for fresh
          weights (`from_architecture`), and is an error otherwise.

        Args:
            preset: a directory, a KerasHub handle, or an architecture name.
            load_weights: False builds the preset's architecture with fresh weights.
            **kwargs: the backbone's other constructor arguments (`dtype`, `dropout`, ...).

        Example:
        >>> backbone = Backbone.from_preset("runs/tiny")      # trained weights, any family
        >>> backbone = MaskedElmoBackbone.from_preset("tiny_masked", load_weights=False)
        """
        from elmo_tf.files import read_json
        from elmo_tf.models.family import family_for_options, family_for_preset
        from elmo_tf.models.load_backbone import load_backbone

        preset = os.fspath(preset)
        if "://" in preset or _keras_hub_preset(preset):
            return super().from_preset(preset, load_weights=load_weights, **kwargs)
        if not os.path.isdir(preset):
            try:
                family_for_preset(preset)
            except ValueError as error:
                raise ValueError(f"{preset!r} is not a directory, and {error}") from None
            if load_weights:
                raise ValueError(
                    f"{preset!r} names an architecture, and elmo-tf ships no weights for it: "
                    f"`from_preset({preset!r}, load_weights=False)` builds it with fresh "
                    "weights; trained ones load from a directory (`elmo-tf train`'s or "
                    "`init`'s output, a `save_to_preset` directory, or AllenNLP's released "
                    "files as options.json and weights.hdf5).")
            return cls.from_architecture(preset, **kwargs)
        files = [os.path.join(preset, name) for name in ("options.json", "weights.hdf5")]
        missing = [f for f in files[:1 + bool(load_weights)] if not os.path.isfile(f)]
        if missing:
            raise FileNotFoundError(f"{preset} is not a preset directory: it lacks "
                                    f"{', '.join(os.path.basename(f) for f in missing)} "
                                    "(and config.json: what `elmo-tf train` and `elmo-tf "
                                    "init` write, and `save_to_preset`).")
        if load_weights:
            backbone = load_backbone(*files, **kwargs)
        else:
            family = family_for_options(read_json(files[0]), source=files[0])
            backbone = family.backbone_class(
                family.config_class.from_options_json(files[0]), **kwargs)
        if not isinstance(backbone, cls):
            raise ValueError(f"{preset} holds a {type(backbone).__name__}, not a "
                             f"{cls.__name__} (Backbone.from_preset takes any family's).")
        return backbone

    def save_to_preset(self, preset_dir, max_shard_size=10):
        """Writes the backbone as a KerasHub preset (`config.json`, `metadata.json`,
        `model.weights.h5`; KerasHub's own writer), each file whole or not at all: written in
        a temporary directory, then a new `preset_dir` renamed into place whole, or into an
        existing one the files renamed one by one, `config.json` last and an earlier one
        removed first (a directory without it is no KerasHub preset: a failed write leaves no
        preset that mixes two models), after a check that the disk has room for the weights
        (`files.write_files_atomically`).

        Args:
            preset_dir: the directory (created if need be; other files in it are kept).
            max_shard_size: as KerasHub's: weights over this many GB are sharded.

        Example:
        >>> backbone.save_to_preset("my_elmo")
        >>> keras_hub.models.Backbone.from_preset("my_elmo")   # after `import elmo_tf`
        """
        from elmo_tf.files import variables_bytes, write_files_atomically

        write_files_atomically(
            preset_dir, lambda staging: super(Backbone, self).save_to_preset(
                staging, max_shard_size=max_shard_size), last="config.json",
            needed_bytes=variables_bytes(self.weights) + 2**20)

    @classmethod
    def from_architecture(cls, name, **kwargs):
        """A backbone of the registered preset architecture `name`, with fresh weights.

        Example:
        >>> ElmoBackbone.from_architecture("tiny").count_params()
        """
        from elmo_tf.models.family import family_for_preset

        family = family_for_preset(name)
        if not issubclass(family.backbone_class, cls):
            raise ValueError(f"{name!r} is a preset of the {family.name} family "
                             f"({family.backbone_class.__name__}), not a {cls.__name__}.")
        return family.backbone_class(family.config_class.from_architecture(name), **kwargs)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):  # the layers' policy (see `get_config`s)
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)

    def __call__(self, char_ids, *args, **kwargs):
        char_ids = check_char_ids(char_ids, self.max_characters_per_token)
        if not isinstance(char_ids, keras.KerasTensor):
            # The backbone finds the padding in the char ids itself; a Keras mask attached to
            # them (by `TokensToCharIds`) is dropped here, not passed into the graph.
            char_ids = tf.identity(char_ids)
        return super().__call__(char_ids, *args, **kwargs)

    @staticmethod
    def embed_compiles():
        """Whether `embed` compiles with XLA on this device (a GPU): each new padded shape of
        its input is then a compilation of the whole model (seconds), which a caller with
        a one-off pass over a small set of texts may want to spend on few shapes.

        Returns:
            True on a GPU (the device `embed` would run on), False elsewhere.

        Example:
        >>> if backbone.embed_compiles():
        ...     char_ids = pad_to_a_power_of_two(char_ids)   # fewer compilations
        """
        return compute_device_type() == "GPU"

    def embed(self, char_ids):
        """Runs the model for inference, the fastest way the device allows.

        Same outputs as calling the model with `training=False`, through cached graphs (no
        retracing per shape). On a CPU one graph serves every shape. On a GPU the graph is
        compiled with XLA (several times the plain graph's throughput: docs/benchmarks.md), and
        XLA compiles once per input shape: the batch and
        time axes are padded to shape buckets (at most four sizes per doubling: each axis grows by less
        than 25 %; a stateful model's batch is not padded, its rows are its state), and the
        padding is dropped from the outputs. The input is checked first (XLA drops run-time
        checks).
        """
        chars = self.max_characters_per_token
        char_ids = check_char_ids(char_ids, chars)
        check_right_padded(char_ids)
        batch, time = char_ids.shape[0], char_ids.shape[1]
        if self.stateful and batch > self.max_batch_size:
            raise ValueError(f"a stateful backbone keeps state for max_batch_size="
                             f"{self.max_batch_size} rows; the batch is larger ({batch}).")
        device_type = compute_device_type()
        xla = self.embed_compiles()
        if device_type not in self._embed.functions:
            spec = tf.TensorSpec([None, None, chars], tf.int32)

            def run(ids):
                # A graph does not see the caller's device scope while it is traced: open it
                # again inside, so that the layers size their work for this device.
                with tf.device(f"/{device_type}:0"):
                    return self(ids, training=False)

            self._embed.functions[device_type] = tf.function(
                run, input_signature=[spec], jit_compile=xla, autograph=False)
        function = self._embed.functions[device_type]
        if not xla:
            return function(char_ids)
        rows = batch if self.stateful else shape_bucket(batch)
        padded = tf.pad(char_ids, [[0, rows - batch], [0, shape_bucket(time) - time], [0, 0]])
        outputs = function(padded)
        # Right padding ends every sentence (and its </S>) within the first `time` (+ 2) steps.
        kept = {}
        for name, (axis, boundaries) in OUTPUTS.items():
            index = [slice(batch)] + [slice(None)] * (axis - 1) + [
                slice(time + 2 if boundaries else time)]
            kept[name] = outputs[name][tuple(index)]
        return kept


def _keras_hub_preset(directory):
    """Whether `directory` is a KerasHub preset: a config.json, which is a Keras-serialized
    object where the directory also has the family's options.json (a foreign config.json, such
    as an AllenNLP training config, beside released files, is not)."""
    config = os.path.join(directory, "config.json")
    if not os.path.isfile(config):
        return False
    if not os.path.isfile(os.path.join(directory, "options.json")):
        return True  # KerasHub's loader reads the other formats it knows, or says why not
    try:
        with open(config, encoding="utf-8") as f:
            return "registered_name" in json.load(f)
    except (OSError, ValueError, TypeError):
        return False


def sentence_graph(max_characters_per_token, token_encoder, stack):
    """The contract's functional graph, for a backbone of a token encoder and a layer stack:
    `{"inputs": char_ids, "outputs": {...}}`, the arguments of `keras.Model.__init__`.

    Sentences get `<S>`/`</S>` (`AddSentenceBoundaries`), the token encoder's parts run as
    nodes of the graph (weights keep the layout of the .keras files elmo-tf 0.1 saved,
    "layers/char_cnn", ...), `stack(token_embeddings, mask=...)` returns the layers on the
    boundary grid, and `RemoveSentenceBoundaries` drops the boundaries again.
    """
    char_ids = keras.Input(shape=(None, max_characters_per_token), dtype="int32",
                           name="char_ids")
    ids_with_boundaries, mask_with_boundaries = AddSentenceBoundaries(
        name="add_sentence_boundaries")(char_ids)
    token_embeddings = ids_with_boundaries
    for layer in token_encoder.parts:
        token_embeddings = layer(token_embeddings)
    # Built with its parts: Keras would otherwise take the model for unbuilt and rebuild it
    # from a data batch under a distribution strategy (see `Task`).
    token_encoder.built = True
    layers_with_boundaries = keras.ops.cast(
        stack(token_embeddings, mask=mask_with_boundaries), "float32")
    layers, mask = RemoveSentenceBoundaries(  # float32 in, float32 out, any policy
        time_axis=2, dtype="float32", name="remove_sentence_boundaries")(
        layers_with_boundaries, mask_with_boundaries)
    return {"inputs": char_ids,
            "outputs": {"layers": layers, "mask": mask,
                        "layers_with_boundaries": layers_with_boundaries,
                        "mask_with_boundaries": mask_with_boundaries,
                        "token_embeddings": keras.ops.cast(token_embeddings, "float32")}}


def with_backbone_object(config):
    """A copy of a `get_config` dict whose serialized "backbone" is deserialized: what
    `from_config` of a model or layer that holds a backbone needs."""
    config = dict(config)
    config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
    return config
