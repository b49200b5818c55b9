"""`MaskTokens`: BERT's masked-LM corruption as a Keras preprocessing layer."""

import keras
import tensorflow as tf

from elmo_tf.ops.masking import mask_tokens, replacement_table


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskTokens(keras.layers.Layer):
    """Char ids and word ids of sentences -> masked char ids and masked-LM targets.

    Of the real tokens (never padding, `<S>` or `</S>`) it selects each with probability
    `rate` and replaces it by the mask token (`elmo_tf.text.char_ids.MASK_CHAR`) with
    probability `mask_rate`, by a random vocabulary word with probability `random_rate`, and
    keeps it otherwise (`elmo_tf.ops.masking.mask_tokens`). Every call draws new positions from
    the layer's seed generator, so a seeded layer repeats its sequence of maskings; pass `seed`
    to a call for a fixed masking (evaluation). Works eagerly, in a graph and in `tf.data`.

    Args:
        vocabulary: the vocabulary's tokens (a `Vocabulary`'s `tokens`): random replacements
            are its words (not `<S>`, `</S>`, `<UNK>`). Kept in the config, so that a saved
            model holding the layer reloads.
        rate, mask_rate, random_rate: BERT's 0.15, 0.8 and 0.1.
        seed: the seed generator's seed (None: random).
        max_characters_per_token: char ids per token.

    Call arguments:
        char_ids: int32 `[batch, time, chars]`, right-padded with all-zero rows.
        word_ids: int `[batch, time]` vocabulary ids of the tokens, -1 at padding.
        seed: optional int32 `[2]`, a stateless seed for this call.

    Returns:
        `(masked_char_ids, targets)`, targets int32 `[batch, time]`: the word id at selected
        positions, -1 elsewhere.

    Example:
    >>> masker = MaskTokens(vocabulary.tokens, seed=1)
    >>> masked, targets = masker(char_ids, vocabulary.lookup(tokens))
    """

    def __init__(self, vocabulary, rate=0.15, mask_rate=0.8, random_rate=0.1, seed=None,
                 max_characters_per_token=50, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("rate", rate), ("mask_rate", mask_rate),
                            ("random_rate", random_rate)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]; got {value!r}.")
        if mask_rate + random_rate > 1.0:
            raise ValueError(f"mask_rate + random_rate must be at most 1; got {mask_rate} + "
                             f"{random_rate}.")
        self.vocabulary = [str(t) for t in vocabulary]
        self.rate, self.mask_rate = float(rate), float(mask_rate)
        self.random_rate = float(random_rate)
        self.seed = seed
        self.max_characters_per_token = int(max_characters_per_token)
        self.replacement_char_ids = replacement_table(self.vocabulary,
                                                      self.max_characters_per_token)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def call(self, char_ids, word_ids, seed=None):
        if seed is None:
            seed = tf.cast(self.seed_generator.next(), tf.int32)
        return mask_tokens(char_ids, word_ids, seed, self.replacement_char_ids, self.rate,
                           self.mask_rate, self.random_rate)

    def compute_output_spec(self, char_ids, word_ids, seed=None):
        return (keras.KerasTensor(char_ids.shape, "int32"),
                keras.KerasTensor(word_ids.shape, "int32"))

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, mask_rate=self.mask_rate, random_rate=self.random_rate,
                      seed=self.seed, max_characters_per_token=self.max_characters_per_token,
                      vocabulary=self.vocabulary)
        return config
