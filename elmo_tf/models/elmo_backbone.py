"""`ElmoBackbone`: the ELMo biLM as a Keras functional model."""

import math
import types

import keras
import tensorflow as tf

from elmo_tf.data.char_ids import N_CHAR_IDS
from elmo_tf.layers.add_sentence_boundaries import AddSentenceBoundaries
from elmo_tf.layers.bilm_stack import BiLMStack
from elmo_tf.layers.char_cnn import CharCNN
from elmo_tf.layers.chunking import compute_device_type
from elmo_tf.layers.highway import Highway
from elmo_tf.layers.initializers import initializer, skip_initialization
from elmo_tf.layers.projected_lstm import removed_implementation
from elmo_tf.layers.remove_sentence_boundaries import RemoveSentenceBoundaries
from elmo_tf.models import allennlp_weights
from elmo_tf.models.elmo_config import ElmoConfig


@keras.saving.register_keras_serializable(package="elmo_tf")
class ElmoBackbone(keras.Model):
    """The ELMo biLM: char ids -> the biLM's layer representations.

    The model adds `<S>`/`</S>` itself, encodes every token with the char CNN, highways and
    projection, runs the two LSTM stacks and removes the boundaries again
    (`../shared/spec/elmo-reference.md` §4). It is stateless by default: every call starts from
    zero state, so a sentence always gets the same vectors whatever else is in the batch.
    `stateful=True` reproduces the reference implementations' state carried per batch row
    (see `BiLMStack`); `reset_states()` clears it.

    Input: int32 char ids `[batch, time, max_characters_per_token]` in AllenNLP's `batch_to_ids`
    convention (no boundaries, all-zero rows are padding, right-padded), e.g. from
    `elmo_tf.tokens_to_char_ids`.

    Outputs (a dict):
        "layers": float32 `[batch, n_layers + 1, time, 2P]`: layer 0 the token embedding
            duplicated, then `[forward; backward]` of each LSTM layer; zeros at padding.
        "mask": bool `[batch, time]`.
        "layers_with_boundaries", "mask_with_boundaries": the same on the `time + 2` grid that
            includes `<S>` and `</S>` (what AllenNLP's layer norm takes its statistics over).
        "token_embeddings": `[batch, time + 2, P]`, the char encoder's output.

    Args:
        config: an `ElmoConfig` (or its `to_dict()`).
        stateful: carry LSTM state from call to call, per batch row.
        max_batch_size: rows of kept state when stateful (bilm-tf's default, 128).
        dropout: dropout on every LSTM layer's input in training (see `BiLMStack`); the
            pre-training recipes use 0.1, as the paper does.
        dtype: Keras dtype policy, e.g. `"mixed_bfloat16"` for fast CPU inference.

    Example:
    >>> backbone = ElmoBackbone.from_allennlp("options.json", "weights.hdf5")
    >>> outputs = backbone(elmo_tf.tokens_to_char_ids([["The", "cat", "sat"], ["Hi", ""]]))
    >>> outputs["layers"].shape  # [batch, 3, time, 2P]
    TensorShape([2, 3, 3, 1024])
    """

    def __init__(self, config, stateful=False, max_batch_size=128, dropout=0.0, dtype=None,
                 **kwargs):
        kwargs = removed_implementation(kwargs)
        if isinstance(config, dict):
            config = ElmoConfig(**config)
        # === Layers ===
        add_boundaries = AddSentenceBoundaries(name="add_sentence_boundaries")
        char_cnn = CharCNN(config.filters, config.char_embedding_dim, config.activation,
                           dtype=dtype, name="char_cnn")
        highways = [Highway(dtype=dtype, name=f"highway_{k}") for k in range(config.n_highway)]
        # bilm-tf projects only when the CNN width differs from P (so does its weight file).
        projection = None
        if config.num_filters != config.projection_dim:
            projection = keras.layers.Dense(
                config.projection_dim, dtype=dtype, name="projection",
                kernel_initializer=initializer(keras.initializers.RandomNormal(
                    stddev=math.sqrt(1.0 / config.num_filters))))
        bilm = BiLMStack(config.n_layers, config.lstm_dim, config.projection_dim,
                         config.cell_clip, config.proj_clip, config.use_skip_connections,
                         stateful=stateful, max_batch_size=max_batch_size, dropout=dropout,
                         dtype=dtype,
                         name="bilm")
        remove_boundaries = RemoveSentenceBoundaries(  # float32 in, float32 out, any policy
            time_axis=2, dtype="float32", name="remove_sentence_boundaries")

        # === Functional Model ===
        char_ids = keras.Input(shape=(None, config.max_characters_per_token), dtype="int32",
                               name="char_ids")
        ids_with_boundaries, mask_with_boundaries = add_boundaries(char_ids)
        token_embeddings = _encode(ids_with_boundaries, char_cnn, highways, projection)
        layers_with_boundaries = keras.ops.cast(
            bilm(token_embeddings, mask=mask_with_boundaries), "float32")
        layers, mask = remove_boundaries(layers_with_boundaries, mask_with_boundaries)
        super().__init__(
            inputs=char_ids,
            outputs={"layers": layers, "mask": mask,
                     "layers_with_boundaries": layers_with_boundaries,
                     "mask_with_boundaries": mask_with_boundaries,
                     "token_embeddings": keras.ops.cast(token_embeddings, "float32")},
            dtype=dtype, **kwargs)

        # === Config ===
        self.config = config
        self.char_cnn = char_cnn
        self.highways = highways
        self.projection = projection
        self.bilm = bilm
        # "graph" and "xla"; in a plain namespace, so that SavedModels do not track them.
        self._embed = types.SimpleNamespace(functions={})

    @property
    def stateful(self):
        return self.bilm.stateful

    @property
    def max_batch_size(self):
        return self.bilm.max_batch_size

    @property
    def dropout(self):
        return self.bilm.dropout

    def encode_tokens(self, char_ids):
        """Char ids `[batch, time, chars]` (boundaries as they are) -> token embeddings
        `[batch, time, P]` in the compute dtype: the char CNN, highways and projection."""
        return _encode(char_ids, self.char_cnn, self.highways, self.projection)

    def __call__(self, char_ids, *args, **kwargs):
        char_ids = check_char_ids(char_ids, self.config.max_characters_per_token)
        return super().__call__(char_ids, *args, **kwargs)

    def embed(self, char_ids):
        """Runs the model for inference, the fastest way the device allows.

        Same outputs as calling the model with `training=False`, through cached graphs (no
        retracing per shape). On a CPU one graph serves every shape. On a GPU the graph is
        compiled with XLA (on an H100, 8-12x the throughput of the plain graph at 32-1024
        sentences of 20 tokens), and XLA compiles once per input shape: the batch and time axes
        are padded to shape buckets (at most four sizes per doubling: at most 25 % more work;
        a stateful model's batch is not padded, its rows are its state), and the padding is
        dropped from the outputs.
        """
        chars = self.config.max_characters_per_token
        char_ids = check_char_ids(char_ids, chars)
        check_right_padded(char_ids)
        batch, time = char_ids.shape[0], char_ids.shape[1]
        if self.stateful and batch > self.max_batch_size:
            raise ValueError(f"a stateful biLM keeps state for max_batch_size="
                             f"{self.max_batch_size} rows; the batch is larger ({batch}).")
        xla = compute_device_type() == "GPU"
        key = "xla" if xla else "graph"
        if key not in self._embed.functions:
            spec = tf.TensorSpec([None, None, chars], tf.int32)
            self._embed.functions[key] = tf.function(
                lambda ids: self(ids, training=False), input_signature=[spec], jit_compile=xla)
        if not xla:
            return self._embed.functions[key](char_ids)
        rows = batch if self.stateful else shape_bucket(batch)
        padded = tf.pad(char_ids, [[0, rows - batch], [0, shape_bucket(time) - time], [0, 0]])
        outputs = self._embed.functions[key](padded)
        # Right padding ends every sentence (and its </S>) within the first `time` (+ 2) steps.
        keep = {"layers": (slice(None), slice(time)), "mask": (slice(time),),
                "layers_with_boundaries": (slice(None), slice(time + 2)),
                "mask_with_boundaries": (slice(time + 2),),
                "token_embeddings": (slice(time + 2),)}
        return {name: value[(slice(batch),) + keep[name]] for name, value in outputs.items()}

    def reset_states(self):
        """Zeroes the carried LSTM state of a stateful backbone (no-op when stateless)."""
        self.bilm.reset_states()

    # --- released AllenNLP / bilm-tf files -----------------------------------------------
    @classmethod
    def from_allennlp(cls, options_file, weight_file, stateful=False, **kwargs):
        """Builds the model described by `options_file` and loads `weight_file` (released layout).

        Args:
            options_file: bilm-tf/AllenNLP `*_options.json`.
            weight_file: `*_weights.hdf5` in the released layout.
            stateful: see the class docstring.
            **kwargs: other constructor arguments (`dtype`, `max_batch_size`, ...).
        """
        config = ElmoConfig.from_options_json(options_file)
        with skip_initialization():  # every weight is assigned from the file
            backbone = cls(config, stateful=stateful, **kwargs)
        allennlp_weights.load(backbone, weight_file)
        return backbone

    def save_allennlp(self, weight_file, options_file=None):
        """Writes the weights (and options.json) in the released layout, atomically."""
        allennlp_weights.save(self, weight_file)
        if options_file is not None:
            self.config.to_options_json(options_file)

    # --- Keras serialization -------------------------------------------------------------
    def get_config(self):
        # The layers' policy: a functional model's own policy stays float32 whatever it is given.
        return {"name": self.name, "trainable": self.trainable,
                "dtype": keras.saving.serialize_keras_object(self.bilm.dtype_policy),
                "config": self.config.to_dict(), "stateful": self.stateful,
                "max_batch_size": self.max_batch_size, "dropout": self.dropout}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)


def _encode(char_ids, char_cnn, highways, projection):
    """The context-independent token encoder: char CNN, highways, projection (if any)."""
    token_embeddings = char_cnn(char_ids)
    for highway in highways:
        token_embeddings = highway(token_embeddings)
    return token_embeddings if projection is None else projection(token_embeddings)


def shape_bucket(size):
    """The smallest of the sizes 0-8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ... (four per
    doubling: `m * 2**k` for m in 4-7) that holds `size`: XLA compiles once per shape, and
    padding to these sizes bounds both the compilations and the extra work (< 25 %)."""
    if size <= 8:
        return size
    step = 1 << (size.bit_length() - 3)
    return -(-size // step) * step


def check_right_padded(char_ids):
    """Raises a ValueError naming the row when a padding position (all-zero char ids) comes
    before a token; for eager tensors (graphs check at run time, outside XLA)."""
    if not tf.executing_eagerly() or isinstance(char_ids, keras.KerasTensor):
        return
    mask = tf.reduce_any(char_ids > 0, axis=-1)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    bad = tf.where(tf.reduce_any(mask != tf.sequence_mask(lengths, tf.shape(mask)[1]), axis=1))
    if tf.size(bad):
        raise ValueError(f"sequences must be right-padded: row {int(bad[0, 0])} has padding "
                         "(all-zero char ids, \"\" tokens) before a token; padding may only "
                         "follow the last token of a sentence.")


def check_char_ids(char_ids, max_characters_per_token):
    """Returns `char_ids` as an int32 tensor `[batch, time, chars]`, or raises a clear error."""
    expected = f"int32 char ids [batch, time, {max_characters_per_token}]"
    if isinstance(char_ids, keras.KerasTensor):
        tensor = char_ids
    else:
        try:
            tensor = tf.convert_to_tensor(char_ids)
        except (TypeError, ValueError) as error:
            raise TypeError(f"ELMo expects {expected}; got {type(char_ids).__name__} "
                            f"({error}).") from None
    dtype = tf.as_dtype(tensor.dtype)
    if not dtype.is_integer:
        raise TypeError(
            f"ELMo expects {expected}; got dtype {dtype.name}. String tokens go through "
            "elmo_tf.tokens_to_char_ids or ElmoEmbedding.")
    shape = tuple(tensor.shape)
    if len(shape) != 3 or shape[-1] not in (None, max_characters_per_token):
        raise ValueError(
            f"ELMo expects {expected}; got shape {list(shape)}. Use "
            "elmo_tf.tokens_to_char_ids(tokens) on string tokens [batch, time] padded with \"\".")
    if tf.executing_eagerly() and not isinstance(tensor, keras.KerasTensor) and tf.size(tensor):
        # Before the int32 cast (2**32 + x must not pass as x); a GPU gathers an out-of-range
        # id as zeros without a word.
        low, high = int(tf.reduce_min(tensor)), int(tf.reduce_max(tensor))
        if low < 0 or high >= N_CHAR_IDS:
            raise ValueError(f"ELMo expects {expected} with ids in [0, {N_CHAR_IDS - 1}] (0 is "
                             f"padding); got ids from {low} to {high}.")
    if dtype != tf.int32 and not isinstance(tensor, keras.KerasTensor):
        tensor = tf.cast(tensor, tf.int32)
    return tensor
