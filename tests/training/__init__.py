"""Shared by the training tests: a very small model, a recipe file built on it, and a reader of
the weight files."""

import h5py

# Options.json style: 2x16/8 LSTMs, a 16-filter char CNN, one highway, clips on.
MODEL = {"lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2, "cell_clip": 3,
                  "proj_clip": 3, "use_skip_connections": True},
         "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 8], [2, 8]], "n_highway": 1,
                      "activation": "relu", "max_characters_per_token": 50,
                      "n_characters": 262}}
# Dropout 0 and a vocabulary (~300 words) below num_negatives (8192: full softmax) leave no
# randomness in training but the initialisation and the batch order, both seeded.
RECIPE = {"base": "tiny", "model": MODEL, "batch_size": 8, "window": 10, "dropout": 0.0}


def h5_values(path):
    """{dataset path: array} of an hdf5 file."""
    values = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: values.__setitem__(name, item[()])
                     if isinstance(item, h5py.Dataset) else None)
    return values
