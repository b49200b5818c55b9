"""How lines of text become tokens, the same way in training corpora and in task models:
`get_tokenizer(name)`, 1-D `tf.string` lines -> `tf.RaggedTensor` tokens (`padded_tokens`: a
dense batch of them)."""

import tensorflow as tf

TOKENIZERS = ("whitespace", "wordpunct", "unicode_script")
# Those of core TensorFlow ops only: what a task model's served SavedModel can run.
CORE_TOKENIZERS = ("whitespace", "wordpunct")
INSTALL_HINT = "pip install 'elmo-tf[data]'"

# Exactly the characters Python's `str.split()` splits on (checked over all code points):
# Unicode separators (Z*) plus the C0 controls \t\n\v\f\r\x1c-\x1f and NEL (\x85).
_WHITESPACE = r"[\pZ\t\n\v\f\r\x1c-\x1f\x85]"
# Runs of word characters, or runs of other non-space characters (NLTK's `wordpunct_tokenize`
# with Unicode letters/digits/marks as word characters; RE2's `\w` would be ASCII only).
_WORDPUNCT = r"[\pL\pN\pM_]+|[^\pL\pN\pM_\s]+"


def get_tokenizer(tokenizer):
    """Returns `fn(lines) -> tokens`: 1-D `tf.string` lines → `tf.RaggedTensor` `[lines, None]`.

    Args:
        tokenizer: one of
            * `"whitespace"`: split on whitespace only, exactly like Python's `str.split()`
              (Unicode spaces such as U+00A0 included). For pre-tokenized text such as the 1B
              Word Benchmark. Core TensorFlow ops only.
            * `"wordpunct"`: also splits runs of punctuation/symbols from runs of letters, digits
              and marks (`"can't stop."` → `can ' t stop .`). Core TensorFlow ops only.
            * `"unicode_script"`: `tensorflow_text.UnicodeScriptTokenizer`, splits on whitespace,
              punctuation and changes of script (`"Hello, wörld!"` → `Hello , wörld !`).
              tensorflow-text's (installed with elmo-tf, through keras-hub).
            * a callable with the same contract (its ops must work in `tf.data`).

    Example:
    >>> get_tokenizer("wordpunct")(tf.constant(["Hi, you."])).to_list()
    [[b'Hi', b',', b'you', b'.']]
    """
    if callable(tokenizer):  # AutoGraph's, as tf.data gives a user's function (elmo-tf's own
        # code is traced as written: `keras_compat.trace_without_autograph`)
        return tf.function(tokenizer, autograph=True, reduce_retracing=True)
    if tokenizer == "whitespace":
        return lambda lines: tf.strings.split(tf.strings.regex_replace(lines, _WHITESPACE, " "))
    if tokenizer == "wordpunct":
        return lambda lines: tf.strings.split(tf.strings.regex_replace(
            tf.strings.regex_replace(lines, _WHITESPACE, " "), _WORDPUNCT, r" \0 "))
    if tokenizer == "unicode_script":
        try:
            import tensorflow_text
        except ImportError as e:
            raise ImportError("tokenizer='unicode_script' needs tensorflow-text (installed with "
                              "elmo-tf, through keras-hub): pip install tensorflow-text==2.21.1"
                              ) from e
        return tensorflow_text.UnicodeScriptTokenizer().tokenize
    raise ValueError(f"unknown tokenizer {tokenizer!r}; accepted: "
                     f"{', '.join(map(repr, TOKENIZERS))} or a callable lines -> ragged tokens")


def padded_tokens(tokens):
    """A `[lines, None]` `tf.RaggedTensor` of tokens as a dense `[lines, time]` string tensor,
    right-padded with `""`, `time` at least 1: a batch in which no line has a token (empty
    lines, an empty batch) is one column of padding, masked everywhere, which the models
    handle (Keras's LSTM fails on zero time steps).

    Example:
    >>> padded_tokens(get_tokenizer("whitespace")(tf.constant(["a b", ""]))).numpy().tolist()
    [[b'a', b'b'], [b'', b'']]
    """
    tokens = tokens.to_tensor(default_value="")
    return tf.pad(tokens, [[0, 0], [0, tf.maximum(1 - tf.shape(tokens)[1], 0)]],
                  constant_values="")
