"""`TokensToCharIds`: ELMo's preprocessor, tokens (or char ids) -> char ids, with the mask."""

import keras

from elmo_tf.text.char_ids import (
    MAX_CHARACTERS_PER_TOKEN,
    as_tensor,
    check_char_ids,
    is_strings,
    tokens_to_char_ids,
)
from elmo_tf.keras_compat import keep_input_dtypes
from elmo_tf.ops.padding import char_ids_mask, token_mask


@keras.saving.register_keras_serializable(package="elmo_tf")
class TokensToCharIds(keras.layers.Layer):
    """What a backbone reads, from what users give: string tokens `[batch, time]` padded with
    `""`, a `tf.RaggedTensor` of strings, nested lists of `str` or a NumPy string array ->
    int32 char ids `[batch, time, max_characters_per_token]`; char ids pass through, checked.

    The one place where Keras models turn text into char ids (`ElmoEmbedding`, the SavedModel
    export), around `elmo_tf.tokens_to_char_ids` (core TF string ops only, so models that
    contain it can be served; `tf.data` pipelines call that function directly). No sentence
    boundaries are added: the backbone adds them. The output mask is `tokens != ""` (for char
    ids: a row with any id > 0).

    Args:
        max_characters_per_token: ids per token (50 in every released model).

    Example:
    >>> layer = TokensToCharIds()
    >>> layer([["Hello", "world"], ["Hi"]]).shape
    TensorShape([2, 2, 50])
    """

    def __init__(self, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.max_characters_per_token = max_characters_per_token
        self.supports_masking = True
        keep_input_dtypes(self)  # no cast to int32: wrong dtypes get a clear error

    def __call__(self, inputs, *args, **kwargs):
        inputs = as_tensor(inputs)
        # String ops do not compile with XLA; char ids pass through, which compiles. Called
        # on strings once (a functional model's graph), the layer says so for good.
        self.supports_jit = self.supports_jit and not is_strings(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs):
        if not is_strings(inputs):  # a new tensor: Keras puts the output's mask on it, not
            return keras.ops.copy(check_char_ids(inputs, self.max_characters_per_token))  # on x
        if len(inputs.shape) != 2:
            raise ValueError(
                f"string tokens must be [batch, time] (padded with \"\"); got shape "
                f"{list(inputs.shape)}. One sentence is a batch of one: [tokens].")
        return tokens_to_char_ids(inputs, self.max_characters_per_token)

    def compute_mask(self, inputs, mask=None):
        inputs = as_tensor(inputs)
        return token_mask(inputs) if is_strings(inputs) else char_ids_mask(inputs)

    def compute_output_shape(self, input_shape):
        if len(input_shape) == 3:  # char ids
            return tuple(input_shape)
        return tuple(input_shape) + (self.max_characters_per_token,)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config["max_characters_per_token"] = self.max_characters_per_token
        return config
