"""Masked ELMo's tests' corpus: 600 sentences of the built-in generated language and their
vocabulary."""

import numpy as np
import pytest
import tensorflow as tf

from elmo_tf.data import build_vocabulary
from elmo_tf.data.generated_corpus import GeneratedLanguage


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    language = GeneratedLanguage()
    sentences = [language.sample(rng) for _ in range(600)]
    vocabulary = build_vocabulary(
        tf.data.Dataset.from_tensor_slices(tf.ragged.constant(sentences)), progress=False)
    return sentences, vocabulary
