"""ELMo's presets: the architectures known by name, the one registry that `ElmoConfig.from_preset`,
the pre-training recipes (`elmo_tf.recipes`) and the command line read.

One naming scheme: a preset and the recipe that trains it share a name. `elmo_small`,
`elmo_medium` and `elmo_original` are the shapes of AllenNLP's released models (weights come
from their files, `ElmoBackbone.from_allennlp`, or from training); `tiny` is a model of a few
hundred thousand parameters for tests and demos; `elmo_cpu` is sized to pre-train on real text
on a small CPU. The released shapes are also known by their
0.1 names, without the prefix (`"small"`). Each entry holds `ElmoConfig`'s arguments.
"""

RELEASED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


def _released(lstm_dim, projection_dim, n_highway):
    return {"lstm_dim": lstm_dim, "projection_dim": projection_dim, "n_layers": 2,
            "char_embedding_dim": 16, "filters": RELEASED_FILTERS, "cell_clip": 3.0,
            "proj_clip": 3.0, "use_skip_connections": True, "n_highway": n_highway}


ELMO_PRESETS = {
    "tiny": {"lstm_dim": 64, "projection_dim": 16, "n_layers": 2, "char_embedding_dim": 8,
             "filters": ((1, 16), (2, 16), (3, 32), (4, 64)), "cell_clip": 3.0,
             "proj_clip": 3.0, "use_skip_connections": True, "n_highway": 1},
    # A biLM that learns real English on a 2-core CPU in half an hour (recipe `elmo_cpu`,
    # bench/downstream.py): small LSTMs, a 384-filter char CNN over tokens of up to 18
    # characters (longer ones are cut, as 50 cuts them in the released models).
    "elmo_cpu": {"lstm_dim": 256, "projection_dim": 128, "n_layers": 2,
                 "char_embedding_dim": 16,
                 "filters": ((1, 32), (2, 32), (3, 64), (4, 128), (5, 128)), "cell_clip": 3.0,
                 "proj_clip": 3.0, "use_skip_connections": True, "n_highway": 1,
                 "max_characters_per_token": 20},
    "elmo_small": _released(1024, 128, 1),     # elmo_2x1024_128_2048cnn_1xhighway
    "elmo_medium": _released(2048, 256, 1),    # elmo_2x2048_256_2048cnn_1xhighway
    "elmo_original": _released(4096, 512, 2),  # elmo_2x4096_512_2048cnn_2xhighway
}
ALIASES = {"small": "elmo_small", "medium": "elmo_medium", "original": "elmo_original"}
