"""What a sentence classifier's parts are worth on small labelled sets (issue 25, item 4): one
biLM's frozen layers, the same head trained on ELMo alone, on a bag of task-trained word
embeddings alone (`BagOfWords`), and on both, several seeds, beside the bag-of-words logistic
regression of `bench/baselines.py` on the same splits.

    python bench/classifier_heads.py --model DIR [--tasks sentence_polarity uncertainty]
        [--seeds 0 1 2] [--output FILE]

The biLM's layers are computed once per sentence (frozen, as `elmo-tf finetune`'s default),
then each head trains on them: a trained scalar mix (dropout 0.5), a BiLSTM of 64 units per
direction max-pooled over the tokens (the protocol's probe head, `bench/pretraining_value.py`),
the words' mean embedding (64) concatenated where used, dropout 0.5, a dense layer; Adam 1e-3,
batches of 32, at most 10 epochs, patience 3, the best dev epoch. The data is
`bench/real_text.py`'s (fetched at run time, never committed). Writes
`bench/results/classifier_heads-cpu.json` and prints a table.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.inference import machine, versions  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402

TASKS = {"sentence_polarity": ("polarity_train", "polarity_dev"),
         "uncertainty": ("uncertainty_train", "uncertainty_dev")}
HEADS = ("elmo", "words", "elmo+words")
MAX_TOKENS = 80


def features(backbone, texts, batch_size=64):
    """The biLM's layers `[n, time, layers, dim]` (float16) and the padded tokens."""
    from elmo_tf.text.char_ids import tokens_to_char_ids

    tokens = [t.split()[:MAX_TOKENS] for t in texts]
    width = max(map(len, tokens))
    padded = np.array([t + [""] * (width - len(t)) for t in tokens], dtype=object)
    layers = np.zeros((len(texts), width, backbone.num_layers, backbone.output_dim), np.float16)
    for start in range(0, len(texts), batch_size):
        rows = padded[start:start + batch_size]
        used = max(1, max(len(t) for t in tokens[start:start + batch_size]))
        out = backbone.embed(tokens_to_char_ids(rows[:, :used].tolist(),
                                                backbone.max_characters_per_token))
        layers[start:start + len(rows), :used] = np.transpose(out["layers"].numpy(),
                                                              (0, 2, 1, 3))
    return layers, padded.tolist()


def head_model(kind, num_layers, dim, classes):
    import keras
    import tensorflow as tf

    from elmo_tf.layers import ScalarMix
    from elmo_tf.layers.bag_of_words import BagOfWords
    from elmo_tf.layers.masked_max_pooling import MaskedMaxPooling

    layers = keras.Input((None, num_layers, dim), name="layers")
    tokens = keras.Input((None,), dtype="string", name="tokens")
    mask = keras.layers.Lambda(lambda t: tf.not_equal(t, ""), output_shape=(None,))(tokens)
    parts = []
    if kind in ("elmo", "elmo+words"):
        per_layer = keras.layers.Lambda(lambda x: tf.transpose(tf.cast(x, "float32"),
                                                               [0, 2, 1, 3]),
                                        output_shape=(num_layers, None, dim))(layers)
        mixed = keras.layers.Dropout(0.5)(ScalarMix(num_layers)(per_layer, mask=mask))
        encoded = keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True))(
            mixed, mask=mask)
        parts.append(MaskedMaxPooling()(encoded, mask=mask))
    if kind in ("words", "elmo+words"):
        parts.append(BagOfWords(64)(tokens))
    sentence = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    logits = keras.layers.Dense(classes)(keras.layers.Dropout(0.5)(sentence))
    return keras.Model([layers, tokens], logits)


def train_head(kind, train, dev, classes, seed, epochs=10, patience=3):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    (x, t, y), (dx, dt, dy) = train, dev
    model = head_model(kind, x.shape[2], x.shape[3], classes)
    model.compile(keras.optimizers.Adam(1e-3), metrics=["accuracy"], jit_compile=False,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train_data = tf.data.Dataset.from_tensor_slices(((x, tf.constant(t)), y)).shuffle(
        len(y), seed=seed).batch(32)
    dev_data = tf.data.Dataset.from_tensor_slices(((dx, tf.constant(dt)), dy)).batch(64)
    history, began = [], time.time()
    for _ in range(epochs):
        model.fit(train_data, epochs=1, verbose=0)
        history.append(round(float(model.evaluate(dev_data, verbose=0)[1]), 4))
        if len(history) > patience and max(history[-patience:]) <= max(history[:-patience]):
            break
    return {"score": max(history), "dev_by_epoch": history,
            "seconds": round(time.time() - began, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="the biLM: a directory with options.json and weights.hdf5")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--heads", nargs="+", choices=HEADS, default=list(HEADS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "classifier_heads-cpu.json"))
    args = parser.parse_args()
    from bench.baselines import bag_of_words_logistic_regression
    from elmo_tf.data.labelled_text import read_labelled_text
    from elmo_tf.files import write_json_atomically
    from elmo_tf.models.load_backbone import load_backbone

    paths = prepare(args.data_dir)
    backbone = load_backbone(os.path.join(args.model, "options.json"),
                             os.path.join(args.model, "weights.hdf5"))
    report = {"benchmark": "classifier_heads", "command": " ".join(["python"] + sys.argv),
              "model": os.path.abspath(args.model), "machine": machine(),
              "versions": versions(), "tasks": {}}
    for task in args.tasks:
        (texts, labels), (dev_texts, dev_labels) = (read_labelled_text(paths[TASKS[task][0]]),
                                                    read_labelled_text(paths[TASKS[task][1]]))
        texts, dev_texts = [t[0] for t in texts], [t[0] for t in dev_texts]
        names = sorted(set(labels))
        y = np.array([names.index(v) for v in labels])
        dy = np.array([names.index(v) for v in dev_labels])
        train = (*features(backbone, texts), y)
        dev = (*features(backbone, dev_texts), dy)
        out = report["tasks"][task] = {"bag_of_words_logistic_regression":
                                       bag_of_words_logistic_regression(
                                           texts, labels, dev_texts, dev_labels)["score"],
                                       "heads": {}}
        for kind in args.heads:
            runs = {str(seed): train_head(kind, train, dev, len(names), seed)
                    for seed in args.seeds}
            scores = [r["score"] for r in runs.values()]
            out["heads"][kind] = {"mean": round(statistics.mean(scores), 4),
                                  "stdev": round(statistics.stdev(scores), 4)
                                  if len(scores) > 1 else None, "seeds": runs}
            print(task, kind, out["heads"][kind]["mean"], scores, flush=True)
            write_json_atomically(args.output, report)
    print("| task | bag-of-words LR | " + " | ".join(args.heads) + " |")
    print("| --- " * (2 + len(args.heads)) + "|")
    for task, out in report["tasks"].items():
        cells = [f"{100 * out['heads'][k]['mean']:.1f}" + (
            f" ± {100 * out['heads'][k]['stdev']:.1f}" if out["heads"][k]["stdev"] else "")
            for k in args.heads]
        print(f"| {task} | {100 * out['bag_of_words_logistic_regression']:.1f} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
