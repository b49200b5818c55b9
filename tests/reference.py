"""A NumPy float64 reference of ELMo, written only from `../shared/spec/elmo-reference.md`.

It shares no code with `elmo_tf`: weights come as a dict in the released hdf5 naming, sentences
are run one at a time with plain Python loops over time (no padding, no batching), so it checks
the package's batching, masking, boundary handling and kernels against the spec's formulas.
"""

import numpy as np

BOS, EOS, BOW, EOW, PAD = 256, 257, 258, 259, 260


def char_ids(token, max_chars=50):
    """bilm-tf's `UnicodeCharsVocabulary` + `Batcher` (+1) for one token (spec §1)."""
    if token == "":
        return [0] * max_chars
    if token in ("<S>", "</S>"):
        raw = [BOW, BOS if token == "<S>" else EOS, EOW] + [PAD] * (max_chars - 3)
    else:
        data = token.encode("utf-8", "ignore")[: max_chars - 2]
        raw = [BOW, *data, EOW] + [PAD] * (max_chars - 2 - len(data))
    return [r + 1 for r in raw]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax_nll(outputs, ids, kernel, bias):
    """Each row's NLL under the full softmax `outputs @ kernel.T + bias`, for the rows of
    `outputs` (`[..., P]`) whose id (`ids`, `[...]`) is >= 0, in row order."""
    keep = ids.reshape(-1) >= 0
    logits = outputs.reshape(-1, outputs.shape[-1])[keep] @ kernel.T + bias
    logits = logits - logits.max(-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -log_p[np.arange(keep.sum()), ids.reshape(-1)[keep]]


def char_cnn(ids, weights, options):
    """Char ids `[n, 50]` -> CNN features `[n, N]` (spec §4.1 steps 1-3)."""
    table = np.vstack([np.zeros((1, weights["char_embed"].shape[1])), weights["char_embed"]])
    e = table[np.asarray(ids)]  # [n, 50, E]
    features = []
    for i, (width, _) in enumerate(options["char_cnn"]["filters"]):
        kernel = weights[f"CNN/W_cnn_{i}"][0]  # [width, E, n_filters]
        positions = e.shape[1] - width + 1
        conv = sum(e[:, k:k + positions, :] @ kernel[k] for k in range(width))
        conv = conv + weights[f"CNN/b_cnn_{i}"]
        pooled = conv.max(axis=1)
        if options["char_cnn"]["activation"] == "relu":
            features.append(np.maximum(pooled, 0.0))
        else:
            features.append(np.tanh(pooled))
    return np.concatenate(features, axis=-1)


def highway(x, weights, k):
    """bilm-tf's highway: the W_carry gate multiplies the transform branch (spec §3)."""
    t = sigmoid(x @ weights[f"CNN_high_{k}/W_carry"] + weights[f"CNN_high_{k}/b_carry"])
    transform = np.maximum(x @ weights[f"CNN_high_{k}/W_transform"]
                           + weights[f"CNN_high_{k}/b_transform"], 0.0)
    return t * transform + (1.0 - t) * x


def token_embeddings(tokens, weights, options):
    """Char encoder output `[n, P]` for a list of token strings."""
    x = char_cnn([char_ids(t, options["char_cnn"]["max_characters_per_token"]) for t in tokens],
                 weights, options)
    for k in range(options["char_cnn"].get("n_highway") or 0):
        x = highway(x, weights, k)
    if "CNN_proj/W_proj" in weights:
        x = x @ weights["CNN_proj/W_proj"] + weights["CNN_proj/b_proj"]
    return x


def lstm_step(x, h, c, w0, b, wp, cell_clip, proj_clip):
    """TF1 `LSTMCell` with projection (spec §4.2): gates i, j, f, o; forget bias +1 at run time."""
    z = np.concatenate([x, h]) @ w0 + b
    i, j, f, o = np.split(z, 4)
    c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
    if cell_clip is not None:
        c = np.clip(c, -cell_clip, cell_clip)
    m = sigmoid(o) * np.tanh(c)
    h = m @ wp
    if proj_clip is not None:
        h = np.clip(h, -proj_clip, proj_clip)
    return h, c


def bilm(tokens, weights, options, state=None, keep_boundaries=False):
    """One sentence (no boundaries) -> (`[L + 1, n, 2P]`, final state).

    With `keep_boundaries` the layers keep the `<S>`/`</S>` positions: `[L + 1, n + 2, 2P]`.

    `state[d][k] = (h, c)` is the initial state of direction d, layer k (zeros if None); the
    returned state is what a stateful implementation carries to the next call.
    """
    lstm = options["lstm"]
    n_layers, dim, proj = lstm["n_layers"], lstm["dim"], lstm["projection_dim"]
    x = token_embeddings(["<S>", *tokens, "</S>"], weights, options)
    if state is None:
        state = [[(np.zeros(proj), np.zeros(dim)) for _ in range(n_layers)] for _ in range(2)]
    outputs, final = [], []
    for d in range(2):
        inputs = x if d == 0 else x[::-1]
        layer_outputs, layer_states = [], []
        for k in range(n_layers):
            name = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            h, c = state[d][k]
            out = []
            for t in range(len(inputs)):
                h, c = lstm_step(inputs[t], h, c, weights[f"{name}/W_0"], weights[f"{name}/B"],
                                 weights[f"{name}/W_P_0"], lstm.get("cell_clip"),
                                 lstm.get("proj_clip"))
                out.append(h)
            out = np.array(out)
            if k > 0 and lstm.get("use_skip_connections"):
                out = out + inputs
            layer_outputs.append(out if d == 0 else out[::-1])
            layer_states.append((h, c))
            inputs = out
        outputs.append(layer_outputs)
        final.append(layer_states)
    layers = [np.concatenate([x, x], axis=-1)]
    layers += [np.concatenate([outputs[0][k], outputs[1][k]], axis=-1) for k in range(n_layers)]
    layers = np.stack(layers)
    return (layers if keep_boundaries else layers[:, 1:-1]), final


def scalar_mix(layers, mask, weights, gamma, do_layer_norm):
    """AllenNLP's ScalarMix on `[L, batch, time, D]` with a `[batch, time]` mask (spec §4.6)."""
    s = np.exp(weights - np.max(weights))
    s = s / s.sum()
    out = 0.0
    for k, layer in enumerate(layers):
        if do_layer_norm:
            m = mask[..., None].astype(np.float64)
            n = m.sum() * layer.shape[-1]
            mean = (layer * m).sum() / n
            var = (((layer * m) - mean) * m) ** 2
            layer = (layer - mean) / np.sqrt(var.sum() / n + 1e-13)
        out = out + s[k] * layer
    return gamma * out


def random_options(n_layers=2, dim=16, proj=8, filters=((1, 4), (2, 6), (3, 8)), n_highway=1,
                   cell_clip=3.0, proj_clip=3.0, skip=True, char_dim=4, activation="relu"):
    """A tiny options.json dict in the released format."""
    return {"lstm": {"dim": dim, "projection_dim": proj, "n_layers": n_layers,
                     "cell_clip": cell_clip, "proj_clip": proj_clip,
                     "use_skip_connections": skip},
            "char_cnn": {"embedding": {"dim": char_dim}, "filters": [list(f) for f in filters],
                         "n_highway": n_highway, "activation": activation,
                         "max_characters_per_token": 50, "n_characters": 262}}


def random_weights(options, seed=0, scale=1.0):
    """Random float32 weights in the released hdf5 layout (spec §3 table), as a dict.

    `scale` multiplies the LSTM weights; around 1 the clips fire on a good share of values.
    """
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    e, p, c = cnn["embedding"]["dim"], lstm["projection_dim"], lstm["dim"]
    n = sum(f[1] for f in cnn["filters"])
    normal = lambda *shape, std=1.0: (rng.standard_normal(shape) * std).astype(np.float32)
    w = {"char_embed": normal(261, e)}
    for i, (width, nf) in enumerate(cnn["filters"]):
        w[f"CNN/W_cnn_{i}"] = normal(1, width, e, nf, std=0.3)
        w[f"CNN/b_cnn_{i}"] = normal(nf, std=0.1)
    for k in range(cnn.get("n_highway") or 0):
        for part in ("carry", "transform"):
            w[f"CNN_high_{k}/W_{part}"] = normal(n, n, std=1.0 / np.sqrt(n))
            w[f"CNN_high_{k}/b_{part}"] = normal(n, std=0.5)
    if n != p:
        w["CNN_proj/W_proj"] = normal(n, p, std=1.0 / np.sqrt(n))
        w["CNN_proj/b_proj"] = normal(p, std=0.1)
    for d in range(2):
        for k in range(lstm["n_layers"]):
            name = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            w[f"{name}/W_0"] = normal(2 * p, 4 * c, std=scale / np.sqrt(p))
            w[f"{name}/B"] = normal(4 * c, std=scale)
            w[f"{name}/W_P_0"] = normal(c, p, std=2 * scale / np.sqrt(c))
    return w
