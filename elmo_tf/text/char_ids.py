"""ELMo's character ids: string tokens -> int32 `[..., max_characters_per_token]`.

The encoding is bilm-tf's / AllenNLP's (`docs/conventions.md` §1): the UTF-8 bytes of
a token, cut to `max_characters_per_token - 2` bytes (the cut is byte-wise and may split a multi-byte
character), wrapped in begin/end-of-word, padded with the padding char, and shifted by +1 so that 0
is free for a padding *token* (an all-zero row). The literal tokens `<S>` and `</S>` map to the
sentence-boundary ids. Only core TensorFlow string ops are used, so the function runs eagerly, in
`tf.data`, and inside exported graphs that TF Serving can load.
"""

import keras
import numpy as np
import tensorflow as tf

# Raw ids (before the +1 shift), as in bilm-tf's `UnicodeCharsVocabulary`.
BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
# Masked ELMo's mask token: `[BOW, 255, EOW, PAD...]`, built like `<S>`/`</S>` from one char
# id between begin and end of word. 255 is a byte UTF-8 never produces, so no text token has
# these ids, and it is a row the released char embedding table already has (262 rows): the
# released ids are unchanged. Only `elmo_tf.ops.masking` writes it; no string maps to it.
MASK_CHAR = 255
MAX_CHARACTERS_PER_TOKEN = 50
N_CHAR_IDS = PAD_CHAR + 2  # shifted ids 0 (a padding token) to 261: the char CNN's table

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def special_token_char_ids(char, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Char ids (with the +1 shift) of a token made of one special char, e.g. `<S>`.

    Example:
    >>> special_token_char_ids(BOS_CHAR)[:4]
    [259, 257, 260, 261]
    """
    ids = [BOW_CHAR, char, EOW_CHAR] + [PAD_CHAR] * (max_characters_per_token - 3)
    return [i + 1 for i in ids]


def tokens_to_char_ids(tokens, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Converts string tokens to ELMo char ids, AllenNLP's `batch_to_ids` convention.

    Args:
        tokens: string tensor `[batch, time]` padded with `""` (any rank works: the encoding is
            per token), a `tf.RaggedTensor` of strings (padded with `""` here), a NumPy array of
            strings, or nested Python lists of `str` (rows may differ in length). No sentence
            boundaries: `<S>`/`</S>` are added inside the model. A literal `"<S>"`/`"</S>"`
            token gets the boundary ids.
        max_characters_per_token: ids per token (50 in every released model).

    Returns:
        int32 tensor `tokens.shape + [max_characters_per_token]`; `""` gives an all-zero row.

    Example:
    >>> ids = tokens_to_char_ids([["A", "b"], ["c", ""]])
    >>> ids.shape
    TensorShape([2, 2, 50])
    >>> ids[0, 0, :4].numpy().tolist()
    [259, 66, 260, 261]
    >>> int(tf.reduce_max(ids[1, 1]))
    0
    """
    if isinstance(tokens, tf.RaggedTensor):
        if tokens.dtype != tf.string:
            raise TypeError(f"tokens must be strings; got a RaggedTensor of {tokens.dtype.name}.")
        tokens = tokens.to_tensor(default_value="")
    elif not tf.is_tensor(tokens):
        tokens = tokens_to_tensor(tokens)
    if tokens.dtype != tf.string:
        raise TypeError(
            f"tokens must be a string tensor [batch, time] padded with \"\"; got dtype "
            f"{tokens.dtype.name}. Char ids (int32 [batch, time, {max_characters_per_token}]) go "
            "to the model directly.")
    if max_characters_per_token < 4:
        raise ValueError(f"max_characters_per_token must be at least 4; got {max_characters_per_token}.")
    n = max_characters_per_token - 2
    # Bytes +1; decode_raw truncates to n bytes and zero-pads shorter tokens.
    byte_ids = tf.cast(tf.io.decode_raw(tokens, tf.uint8, fixed_length=n), tf.int32) + 1
    length = tf.minimum(tf.strings.length(tokens, unit="BYTE"), n)[..., None]
    position = tf.range(n)
    body = tf.where(position < length, byte_ids, PAD_CHAR + 1)
    body = tf.where(tf.equal(position, length), EOW_CHAR + 1, body)
    last = tf.where(tf.equal(length, n), EOW_CHAR + 1, PAD_CHAR + 1)
    bow = tf.fill(tf.shape(length), BOW_CHAR + 1)
    ids = tf.concat([bow, body, last], axis=-1)
    for token, char in ((BOS_TOKEN, BOS_CHAR), (EOS_TOKEN, EOS_CHAR)):
        special = tf.constant(special_token_char_ids(char, max_characters_per_token), tf.int32)
        ids = tf.where(tf.equal(tokens, token)[..., None], special, ids)
    return tf.where(tf.equal(tokens, "")[..., None], 0, ids)


def tokens_to_tensor(tokens):
    """Nested lists of `str` (rows may differ in length) or a NumPy string array -> a dense
    string tensor padded with "".

    Example:
    >>> tokens_to_tensor([["a", "b"], ["c"]]).numpy().tolist()
    [[b'a', b'b'], [b'c', b'']]
    """
    if isinstance(tokens, np.ndarray):
        if tokens.dtype.kind not in "USO":
            raise TypeError(f"tokens must be strings; got a NumPy array of {tokens.dtype}.")
        tokens = tokens.tolist()
    _check_python_tokens(tokens)
    if isinstance(tokens, (str, bytes)):
        return tf.constant(tokens, tf.string)
    if not tokens:
        return tf.zeros([0, 0], tf.string)  # a batch of no sentences
    depths = _leaf_depths(tokens)
    if len(depths) > 1:
        raise ValueError(f"tokens mix nesting depths {sorted(depths)}: a batch is a list of "
                         "sentences, each a list of str tokens ([[\"a\", \"cat\"], [\"hi\"]]).")
    ragged = tf.ragged.constant(tokens, dtype=tf.string)
    return ragged.to_tensor(default_value="") if isinstance(ragged, tf.RaggedTensor) else ragged


def is_strings(inputs):
    """True for string tensors (dense or ragged), string arrays and nested lists of str.

    An empty Python list counts as a batch of no sentences of tokens.
    """
    if isinstance(inputs, np.ndarray):
        return inputs.dtype.kind in "USO"
    if hasattr(inputs, "dtype"):
        return tf.as_dtype(inputs.dtype) == tf.string
    while isinstance(inputs, (list, tuple)):
        if not inputs:
            return True
        inputs = inputs[0]
    return isinstance(inputs, (str, bytes))


def as_tensor(inputs):
    """Tokens as nested lists of `str` or a NumPy string array -> a string tensor padded with
    `""`, nested lists of numbers -> a NumPy array (Keras layers take tensors and arrays);
    anything else as it is. A lone string, or lists that are neither, is a `ValueError` that
    says what a batch is."""
    if isinstance(inputs, (str, bytes)):
        raise ValueError(f"got one string ({inputs!r:.40}); ELMo takes a batch of tokenized "
                         "sentences: [[\"a\", \"cat\"], ...] (one sentence is a batch of one, "
                         "its tokens split beforehand), or int32 char ids [batch, time, 50].")
    if isinstance(inputs, (list, tuple, np.ndarray)) and is_strings(inputs):
        return tokens_to_tensor(inputs)
    if isinstance(inputs, (list, tuple)):
        try:
            array = np.asarray(inputs)
        except ValueError:  # ragged
            array = None
        if array is None or array.dtype.kind not in "iu":
            raise ValueError("inputs are nested lists that are neither str tokens nor a "
                             "rectangular array of ints: give string tokens [batch, time] (a "
                             "list of token lists) or int32 char ids [batch, time, 50].")
        return array
    return inputs


def _leaf_depths(nested, depth=0):
    if isinstance(nested, (list, tuple)):
        return set().union(*(_leaf_depths(x, depth + 1) for x in nested)) if nested else {depth + 1}
    return {depth}


def _check_python_tokens(nested, where="tokens"):
    if isinstance(nested, (list, tuple)):
        for i, item in enumerate(nested):
            _check_python_tokens(item, f"{where}[{i}]")
    elif not isinstance(nested, (str, bytes)):
        raise TypeError(
            f"{where} is {type(nested).__name__} {nested!r}; tokens must be str (lists of "
            "sentences of str tokens, padded with \"\").")


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
