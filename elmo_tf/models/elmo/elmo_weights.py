"""Reading and writing the released AllenNLP/bilm-tf `*_weights.hdf5` layout.

`docs/conventions.md` §3: one float32 dataset per tensor, named as bilm-tf's
`dump_weights` writes them. The model's variables keep the file's layouts, so loading is a
reshape (`CNN/W_cnn_i` drops its leading 1) or a row split (an LSTM's `W_0` is
`[input_kernel; recurrent_kernel]`); the char embedding's zero padding row is added by `CharCNN`
at run time, not stored.
"""

import h5py
import numpy as np

from elmo_tf.files import hdf5_for_writing, write_atomically


def entries(backbone):
    """`(dataset name, file shape, variables)` for every tensor of the released layout.

    A dataset holds its variables concatenated along their first axis, reshaped to the file shape.
    """
    config = backbone.config
    encoder = backbone.token_encoder
    cnn = encoder.char_cnn
    yield "char_embed", (261, config.char_embedding_dim), [cnn.char_embed]
    for i, (width, n_filters) in enumerate(config.filters):
        yield f"CNN/W_cnn_{i}", (1, width, config.char_embedding_dim, n_filters), [cnn.kernels[i]]
        yield f"CNN/b_cnn_{i}", (n_filters,), [cnn.biases[i]]
    n = config.num_filters
    for k, highway in enumerate(encoder.highways):
        yield f"CNN_high_{k}/W_carry", (n, n), [highway.carry_kernel]
        yield f"CNN_high_{k}/b_carry", (n,), [highway.carry_bias]
        yield f"CNN_high_{k}/W_transform", (n, n), [highway.transform_kernel]
        yield f"CNN_high_{k}/b_transform", (n,), [highway.transform_bias]
    p, c = config.projection_dim, config.lstm_dim
    if encoder.projection is not None:
        yield "CNN_proj/W_proj", (n, p), [encoder.projection.kernel]
        yield "CNN_proj/b_proj", (p,), [encoder.projection.bias]
    for d, stack in enumerate(backbone.bilm.stacks):
        for k, lstm in enumerate(stack):
            prefix = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            # Input rows: P, or 2P from Masked ELMo's second layer on ([forward; backward]).
            rows = lstm.input_kernel.shape[0] + p
            yield f"{prefix}/W_0", (rows, 4 * c), [lstm.input_kernel, lstm.recurrent_kernel]
            yield f"{prefix}/B", (4 * c,), [lstm.bias]
            if lstm.projection_kernel is not None:  # a Masked ELMo cell may have none
                yield f"{prefix}/W_P_0", (c, p), [lstm.projection_kernel]


def load(backbone, weight_file):
    """Loads `weight_file` into `backbone`; every dataset must be present with its exact shape.

    Raises:
        ValueError: naming the file, the dataset, and the expected and found shapes, for a missing
            dataset, a wrong shape, a dataset the options do not describe or one that does not
            hold numbers, or one with NaN or infinite values: all checked before anything is
            assigned.
    """
    expected = list(entries(backbone))
    try:
        f = h5py.File(weight_file, "r")
    except OSError as error:
        hint = (" It is a JSON file: options.json given where the weights belong? (e.g. "
                "--options and --weights swapped)" if _starts_with_json(weight_file) else "")
        raise ValueError(f"{weight_file}: cannot read it as an hdf5 weight file "
                         f"({error}).{hint}") from None
    with f:
        found = _dataset_shapes(f)
        for name, shape, _ in expected:
            if name not in found:
                raise ValueError(
                    f"{weight_file}: missing dataset {name!r} (expected shape {shape}); the file "
                    f"has {sorted(found)}. Is it the weight file for these options?")
            if found[name] != shape:
                raise ValueError(
                    f"{weight_file}: dataset {name!r} has shape {found[name]}, but the options "
                    f"need {shape}. Are the options.json and the weight file from the same model?")
        for name, _, _ in expected:
            if f[name].dtype.kind not in "fiu":
                raise ValueError(f"{weight_file}: dataset {name!r} holds {f[name].dtype}, not "
                                 "numbers (float32 in the released files).")
        unexpected = sorted(set(found) - {name for name, _, _ in expected})
        if unexpected:
            raise ValueError(
                f"{weight_file}: datasets {unexpected} are not part of the model the options "
                "describe (more layers or highways, a CNN projection, or LSTM projections W_P_0 "
                "the options do not have: lstm.projection false).")
        # One dataset, then one variable, at a time (a row range of its dataset), so that
        # loading holds no more than one matrix besides the model; every value is checked
        # before the first is assigned.
        for name, _, _ in expected:
            values = np.asarray(f[name][...], np.float32)
            bad = values.size - np.count_nonzero(np.isfinite(values))
            if bad:
                raise ValueError(
                    f"{weight_file}: dataset {name!r} holds {bad:,} NaN or infinite values (a "
                    "training run that diverged?); the model would output NaN.")
        for name, _, variables in expected:
            dataset, start = f[name], 0
            for variable in variables:
                rows = variable.shape[0]
                # W_0 is split by rows; every other dataset is one variable, maybe reshaped.
                part = dataset[start:start + rows] if len(variables) > 1 else dataset[...]
                variable.assign(np.asarray(part, np.float32).reshape(variable.shape))
                start += rows


def save(backbone, weight_file):
    """Writes `backbone`'s weights to `weight_file` in the released layout (float32, atomically)."""
    arrays = [(name, np.concatenate([np.asarray(v.numpy(), np.float32) for v in variables])
               .reshape(shape)) for name, shape, variables in entries(backbone)]

    def write(tmp):
        with hdf5_for_writing(tmp) as f:
            for name, array in arrays:
                f.create_dataset(name, data=array)

    write_atomically(weight_file, write, needed_bytes=sum(a.nbytes for _, a in arrays) + 2**20)


def _dataset_shapes(group):
    shapes = {}
    group.visititems(lambda name, obj: shapes.__setitem__(name, obj.shape)
                     if isinstance(obj, h5py.Dataset) else None)
    return shapes


def _starts_with_json(path):
    """Whether the file begins as a JSON object does."""
    try:
        with open(path, "rb") as f:
            return f.read(64).lstrip().startswith(b"{")
    except OSError:
        return False
