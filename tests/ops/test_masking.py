"""BERT's masking (`mask_tokens`): rates, what is never selected, seeds, the mask token's char
ids."""

import numpy as np
import tensorflow as tf

from elmo_tf.ops.masking import mask_tokens, replacement_table
from elmo_tf.text.char_ids import MASK_CHAR, special_token_char_ids, tokens_to_char_ids

# The specials anywhere (a user's vocabulary file): random replacements are words only.
VOCAB = [f"w{i}" for i in range(50)] + ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(50, 97)]
MASK_IDS = special_token_char_ids(MASK_CHAR)


def _batch(rows=400, length=40, seed=0):
    """Sentences wrapped in <S> ... </S> and right-padded: word ids, char ids."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, length - 1, rows)
    tokens, ids = [], []
    for n in lengths:
        words = rng.integers(0, 97, n)
        pad = length - 2 - n
        tokens.append(["<S>"] + [f"w{w}" for w in words] + ["</S>"] + [""] * pad)
        ids.append([50] + words.tolist() + [51] + [-1] * pad)
    return tokens_to_char_ids(tokens), tf.constant(ids), np.array(tokens)


def test_rates_specials_and_padding():
    char_ids, word_ids, tokens = _batch()
    table = replacement_table(VOCAB, 50)
    assert table.shape == (97, 50)
    masked, targets = mask_tokens(char_ids, word_ids, [3, 4], table)
    masked, targets, char_ids = masked.numpy(), targets.numpy(), char_ids.numpy()
    selected = targets >= 0
    real = (tokens != "") & (tokens != "<S>") & (tokens != "</S>")
    assert not (selected & ~real).any()  # never <S>, </S> or padding
    np.testing.assert_array_equal(targets[selected], word_ids.numpy()[selected])
    n = real.sum()
    assert abs(selected.sum() / n - 0.15) < 4 * np.sqrt(0.15 * 0.85 / n)
    is_mask = (masked == MASK_IDS).all(-1)
    unchanged = (masked == char_ids).all(-1)
    assert not (is_mask & ~selected).any() and unchanged[~selected].all()
    k = selected.sum()
    fractions = [is_mask[selected].mean(), unchanged[selected].mean()]
    for got, want in zip(fractions, [0.8, 0.1]):
        assert abs(got - want) < 4 * np.sqrt(want * (1 - want) / k), fractions
    # The rest are vocabulary words drawn uniformly (a repeat of the original is "unchanged"),
    # never <S>, </S> or <UNK>.
    replaced = selected & ~is_mask & ~unchanged
    words = {tuple(row) for row in tokens_to_char_ids([[f"w{i}" for i in range(97)]])[0].numpy()
             .tolist()}
    assert replaced.sum() > 0 and all(tuple(row) in words for row in masked[replaced].tolist())
    assert abs(replaced.sum() / k - 0.1 * 96 / 97) < 4 * np.sqrt(0.1 * 0.9 / k)


def test_the_same_seed_gives_the_same_masking_and_another_seed_another():
    char_ids, word_ids, _ = _batch(rows=20)
    table = replacement_table(VOCAB, 50)
    a = mask_tokens(char_ids, word_ids, [1, 2], table)
    b = tf.function(lambda: mask_tokens(char_ids, word_ids, [1, 2], table), jit_compile=True)()
    c = mask_tokens(char_ids, word_ids, [1, 3], table)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert (a[1].numpy() != c[1].numpy()).any()


def test_no_text_token_has_the_mask_tokens_char_ids():
    # 255 is a byte UTF-8 never produces: no string, "<MASK>" and "ÿ" (U+00FF) included, maps
    # to the mask token, and the released ids of <S>, </S> are unchanged.
    ids = tokens_to_char_ids([["<MASK>", "[MASK]", "\u00ff", "\U0010ffff", "<S>"]])[0].numpy()
    assert not (ids == MASK_IDS).all(-1).any()
    assert ids[4, :3].tolist() == [259, 257, 260]
    assert MASK_IDS[:3] == [259, 256, 260]
