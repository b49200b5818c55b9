import numpy as np
import tensorflow as tf

from elmo_tf import ElmoBackbone, ElmoConfig, tokens_to_char_ids
from elmo_tf.layers import TokenEncoder
from tests import reference
from tests.conftest import assert_serializable

TOKENS = ["The", "cat", "Ünïcödé", "x" * 60]


def test_matches_the_spec_encoder_and_is_what_the_backbone_reads(tiny_model):
    """The released weights load into a backbone's encoder, which then computes the spec's
    char CNN, highway and projection."""
    options, weights, options_file, weight_file = tiny_model
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file)
    encoder = backbone.token_encoder
    assert [type(layer).__name__ for layer in encoder.parts] == ["CharCNN", "Highway", "Dense"]
    got = encoder(tokens_to_char_ids([TOKENS])).numpy()[0]
    np.testing.assert_allclose(got, reference.token_embeddings(TOKENS, weights, options),
                               atol=1e-5)
    outputs = backbone(tokens_to_char_ids([TOKENS]))
    np.testing.assert_allclose(outputs["token_embeddings"][0, 1:-1], got, atol=1e-6)


def test_no_projection_when_the_cnn_width_is_the_projection_size():
    encoder = TokenEncoder(filters=[[1, 3], [2, 5]], char_embedding_dim=4, projection_dim=8)
    assert encoder.projection is None and len(encoder.parts) == 1
    assert encoder(tokens_to_char_ids([["a", "b"]])).shape == (1, 2, 8)


def test_config_round_trip_dtype_and_xla():
    config = ElmoConfig(lstm_dim=8, projection_dim=6, n_layers=1, char_embedding_dim=4,
                        filters=((1, 4), (2, 6)), n_highway=2)
    encoder = TokenEncoder.from_elmo_config(config, dtype="mixed_bfloat16")
    ids = tokens_to_char_ids([TOKENS])
    restored = assert_serializable(encoder, ids)
    assert restored.n_highway == 2 and encoder(ids).dtype == tf.bfloat16
    plain = TokenEncoder.from_elmo_config(config)
    np.testing.assert_allclose(tf.function(plain, jit_compile=True)(ids), plain(ids), atol=1e-5)
