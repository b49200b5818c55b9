"""Embedding files in the layout bilm-tf's and AllenNLP's users already read."""

import json

import h5py

from elmo_tf.checks import check_positive_ints
from elmo_tf.text.char_ids import tokens_to_char_ids
from elmo_tf.files import hdf5_for_writing, write_atomically
from elmo_tf.keras_compat import Progress


LAYERS = ("all", "top", "average")


def write_embeddings(backbone, sentences, output_file, layers="all", batch_size=64,
                     progress=True):
    """Embeds tokenized sentences and writes their biLM layers to an hdf5 file, atomically.

    The layouts of bilm-tf's `dump_bilm_embeddings` and AllenNLP's `elmo --all/--top/--average`:
    dataset `"i"` holds sentence i as float32 `[n_layers + 1, n_tokens, 2P]` (`layers="all"`),
    `[n_tokens, 2P]` of the top LSTM layer (`"top"`) or the mean of all layers (`"average"`),
    and `sentence_to_index` holds the JSON map from each sentence (tokens joined by spaces) to
    its index. Sentences are batched by length for speed and embedded statelessly, so each
    sentence's vectors are the same whatever else is in the file. An empty sentence gets a
    dataset with 0 tokens.

    Args:
        backbone: a `Backbone`, e.g. an `ElmoBackbone` (a stateful one is refused: its vectors
            would depend on the batching order).
        sentences: a list of token lists.
        output_file: the `.hdf5` path; nothing is written there unless every sentence succeeded.
        layers: `"all"`, `"top"` or `"average"`.
        batch_size: sentences per forward pass.
        progress: show a progress bar.

    Returns:
        The number of tokens embedded.

    Example:
    >>> write_embeddings(backbone, [["The", "cat", "sat", "."]], "vectors.hdf5", layers="top")
    4
    """
    if backbone.stateful:
        raise ValueError("write_embeddings needs a stateless backbone; its vectors would depend "
                         "on the order of the batches otherwise.")
    check_positive_ints(batch_size=batch_size)
    if layers not in LAYERS:
        raise ValueError(f"layers must be one of {LAYERS}; got {layers!r}.")
    select = {"all": lambda x: x, "top": lambda x: x[-1], "average": lambda x: x.mean(axis=0)}[
        layers]
    sentences = [list(s) for s in sentences]
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    bar = Progress(len(sentences), unit_name="sentence") if progress else None

    # Each sentence's dataset plus an object header (about 2 kB); the whole file for "all".
    row_bytes = 4 * backbone.output_dim * (backbone.num_layers if layers == "all" else 1)
    needed = sum(len(s) * row_bytes + 2048 for s in sentences) + 2**20

    def write(tmp):
        with hdf5_for_writing(tmp) as f:
            for start in range(0, len(order), batch_size):
                batch = order[start:start + batch_size]
                ids = tokens_to_char_ids([sentences[i] for i in batch],
                                         backbone.max_characters_per_token)
                vectors = backbone.embed(ids)["layers"].numpy()
                for row, i in enumerate(batch):
                    f.create_dataset(str(i), data=select(vectors[row, :, :len(sentences[i])]))
                if bar is not None:
                    bar.add(len(batch))
            index = {" ".join(s): str(i) for i, s in enumerate(sentences)}
            f.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype(),
                             data=[json.dumps(index)])

    write_atomically(output_file, write, needed_bytes=needed)
    return sum(len(s) for s in sentences)
