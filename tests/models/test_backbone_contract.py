"""A backbone that is not ELMo's but keeps the `Backbone` contract works wherever a backbone is
used: `ElmoEmbedding`, the SavedModel export and `dump` know nothing else of it."""

import h5py
import keras
import numpy as np
import tensorflow as tf

from elmo_tf import ElmoEmbedding, tokens_to_char_ids
from elmo_tf.export import export_saved_model, write_embeddings
from elmo_tf.layers import AddSentenceBoundaries, RemoveSentenceBoundaries
from elmo_tf.models.backbone import Backbone

TOKENS = [["a", "bb", "ccc"], ["dddd", "", ""]]
DIM = 5


class StandInBackbone(Backbone):
    """Token vector: a dense map of the char ids; one context layer: a cumulative sum over the
    sentence grid, forward and backward (so each position sees its neighbours)."""

    def __init__(self, **kwargs):
        char_ids = keras.Input(shape=(None, 50), dtype="int32")
        ids, mask = AddSentenceBoundaries()(char_ids)
        tokens = keras.layers.Dense(DIM, name="tokens")(keras.ops.cast(ids, "float32") / 262.0)
        weights = keras.ops.expand_dims(keras.ops.cast(mask, "float32"), -1)
        tokens = tokens * weights
        forward = keras.ops.cumsum(tokens, axis=1) * weights
        backward = keras.ops.flip(keras.ops.cumsum(keras.ops.flip(tokens, 1), axis=1), 1) * weights
        grid = keras.ops.stack([keras.ops.concatenate([tokens, tokens], -1),
                                keras.ops.concatenate([forward, backward], -1)], axis=1)
        layers, sentence_mask = RemoveSentenceBoundaries(time_axis=2)(grid, mask)
        super().__init__(inputs=char_ids, outputs={
            "layers": layers, "mask": sentence_mask, "layers_with_boundaries": grid,
            "mask_with_boundaries": mask, "token_embeddings": tokens}, **kwargs)
        self.num_layers, self.output_dim, self.token_dim = 2, 2 * DIM, DIM
        self.max_characters_per_token = 50


def test_elmo_embedding_mixes_any_backbone():
    backbone = StandInBackbone()
    elmo = ElmoEmbedding(backbone, dropout=0.0)
    out = elmo(TOKENS)
    assert out.shape == (2, 3, 2 * DIM) and len(elmo.scalar_mixes[0].scalar_weights.numpy()) == 2
    layers = backbone(tokens_to_char_ids(TOKENS))["layers"].numpy()
    np.testing.assert_allclose(out, layers.mean(axis=1), atol=1e-6)  # the initial mix: the mean
    assert elmo.compute_mask(TOKENS).numpy().tolist() == [[True] * 3, [True, False, False]]


def test_export_and_dump_of_any_backbone(tmp_path):
    backbone = StandInBackbone()
    elmo = ElmoEmbedding(backbone, dropout=0.0)
    path = export_saved_model(elmo, tmp_path / "serving")
    served = tf.saved_model.load(path).signatures["tokens"](
        tokens=tf.constant([["a", "bb", "ccc"], ["dddd", "", ""]]),
        sequence_len=tf.constant([3, 1]))
    assert set(served) == {"word_emb", "lstm_outputs1", "elmo", "default", "mask"}
    expected = backbone(tokens_to_char_ids(TOKENS))
    np.testing.assert_allclose(served["lstm_outputs1"], expected["layers"][:, 1], atol=1e-6)
    np.testing.assert_allclose(served["word_emb"], expected["layers"][:, 0, :, :DIM], atol=1e-6)

    count = write_embeddings(backbone, [["a", "bb", "ccc"], ["dddd"]], tmp_path / "v.hdf5",
                             progress=False)
    assert count == 4
    with h5py.File(tmp_path / "v.hdf5", "r") as f:
        np.testing.assert_allclose(f["1"][...], expected["layers"][1, :, :1], atol=1e-6)
        assert f["0"].shape == (2, 3, 2 * DIM)
