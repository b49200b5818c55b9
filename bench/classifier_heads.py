"""What a sentence classifier's parts are worth on small labelled sets (issues 25, 36 and 38):
the package's `TextClassifier`, trained by `elmo-tf finetune --task classify` on one biLM, with
ELMo alone (`--word-embedding-dim 0`) and with a bag of task-trained word embeddings beside it
(`--word-embedding-dim 64`, `finetune`'s default); the bag of words alone (the same
`BagOfWords` and dense layer without ELMo, trained the same way); and the bag-of-words logistic
regression of `bench/baselines.py`. Several seeds, on the probe splits of
`bench/pretraining_value.py` (`bench/real_text.py`'s data, fetched at run time, never
committed): every epoch (the regression's L2) is chosen on **dev** and the **test** split is
reported, with the last epoch's test score beside it.

    python bench/classifier_heads.py --model DIR [--tasks sentence_polarity uncertainty]
        [--seeds 0 1 2] [--work DIR] [--output FILE]

`--model`: a biLM directory (options.json, weights.hdf5), e.g. `elmo-tf train --recipe elmo_cpu`'s.
Every neural head has the protocol's probe settings but its own training length: a BiLSTM of
64 units per direction over the scalar mix, max-pooled, dropout 0.5, Adam 1e-3, batches of 32,
at most 10 epochs, patience 3. The ELMo heads are `finetune` runs (each a fresh process; the
frozen biLM's outputs computed once); the words alone, in this process, on the
`TaskPreprocessor`'s hashed word ids of whitespace tokens (as `finetune` splits them on a biLM
trained with the default tokenizer). Writes `bench/results/classifier_heads-cpu-test.json`
(after each run: a stopped benchmark keeps what ran) and prints a table. (Until 2026-11-29
this script trained hand-built heads on its own cache of the biLM's layers and reported the
dev score it chose on: `classifier_heads-cpu.json`.)
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
from bench.pretraining_value import TASKS, TEST, _finetune, _scores  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402

CLASSIFY_TASKS = [task for task, spec in TASKS.items() if spec[0] == "classify"]
HEADS = ("elmo", "words", "elmo+words")
SETTINGS = {"epochs": 10, "patience": 3, "batch_size": 32, "learning_rate": 1e-3,
            "encoder_units": 64, "dropout": 0.5, "word_embedding_dim": 64}


def finetune_head(paths, model, task, kind, seed, work):
    """`elmo-tf finetune` of the task's `TextClassifier` (`kind`: ELMo alone or with the words)
    into `work`; its scores and wall seconds."""
    words = SETTINGS["word_embedding_dim"] if kind == "elmo+words" else 0
    flags = [a for k, v in {**SETTINGS, "word_embedding_dim": words}.items()
             for a in (f"--{k.replace('_', '-')}", str(v))]
    output = os.path.join(work, task, kind, f"seed-{seed}")
    wall, _ = _finetune(paths, model, task, seed, output, flags)
    return {**_scores(output, TASKS[task][3]), "seconds": round(wall, 1)}


def words_head(splits, seed):
    """The bag of task-trained word embeddings alone: `BagOfWords` (`word_embedding_dim`) of
    the hashed words, dropout 0.5, a dense layer; the training and the epoch's choice of
    `SETTINGS`."""
    import keras
    import tensorflow as tf

    from elmo_tf.layers.bag_of_words import BagOfWords
    from elmo_tf.models.char_ids_tokenizer import CharIdsTokenizer
    from elmo_tf.models.downstream import TaskPreprocessor

    keras.utils.set_random_seed(seed)
    preprocessor = TaskPreprocessor(CharIdsTokenizer("whitespace"), word_ids=True)
    data = {name: (preprocessor(tf.constant(texts))["word_ids"], np.array(labels))
            for name, (texts, labels) in splits.items()}
    classes = int(max(data["train"][1])) + 1
    word_ids = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Dropout(SETTINGS["dropout"])(
        BagOfWords(SETTINGS["word_embedding_dim"])(word_ids))
    model = keras.Model(word_ids, keras.layers.Dense(classes)(hidden))
    model.compile(keras.optimizers.Adam(SETTINGS["learning_rate"]), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def accuracy(split):
        return float(model.evaluate(*data[split], batch_size=256, verbose=0)[1])

    history, best_test, began = [], None, time.time()
    for _ in range(SETTINGS["epochs"]):
        model.fit(*data["train"], batch_size=SETTINGS["batch_size"], shuffle=True, verbose=0)
        history.append(accuracy("dev"))
        if len(history) == 1 or history[-1] > max(history[:-1]):  # the first best, as finetune
            best_test = accuracy("test")
        patience = SETTINGS["patience"]
        if len(history) > patience and max(history[-patience:]) <= max(history[:-patience]):
            break
    return {"score": max(history), "test": best_test, "dev_last_epoch": history[-1],
            "test_last_epoch": accuracy("test"), "dev_by_epoch": [round(h, 4) for h in history],
            "seconds": round(time.time() - began, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="the biLM: a directory with options.json and weights.hdf5")
    parser.add_argument("--tasks", nargs="+", choices=CLASSIFY_TASKS, default=CLASSIFY_TASKS)
    parser.add_argument("--heads", nargs="+", choices=HEADS, default=list(HEADS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--work", help="where the finetune runs go (default: MODEL/heads)")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "classifier_heads-cpu-test.json"))
    args = parser.parse_args()
    from bench.baselines import bag_of_words_logistic_regression
    from elmo_tf.data.labelled_text import read_labelled_text
    from elmo_tf.files import write_json_atomically

    paths = prepare(args.data_dir)
    work = args.work or os.path.join(args.model, "heads")
    report = {"benchmark": "classifier_heads", "command": " ".join(["python"] + sys.argv),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": os.path.abspath(args.model),
              "machine": machine(), "versions": versions(), "settings": SETTINGS,
              "reported": "test at the best dev epoch (the regression: at the best dev L2)",
              "tasks": {}}
    for task in args.tasks:
        _, train, dev, _ = TASKS[task]
        splits = {}
        for name, path in (("train", paths[train]), ("dev", paths[dev]),
                           ("test", paths[TEST[task]])):
            texts, labels = read_labelled_text(path)
            splits[name] = ([t[0] for t in texts], labels)
        names = sorted(set(splits["train"][1]))
        ids = {name: (texts, [names.index(v) for v in labels])
               for name, (texts, labels) in splits.items()}
        regression = bag_of_words_logistic_regression(
            *splits["train"], *splits["dev"], test_texts=splits["test"][0],
            test_labels=splits["test"][1])
        out = report["tasks"][task] = {"bag_of_words_logistic_regression": regression,
                                       "heads": {}}
        for kind in args.heads:
            runs = {}
            for seed in args.seeds:
                runs[str(seed)] = (words_head(ids, seed) if kind == "words" else
                                   finetune_head(paths, args.model, task, kind, seed, work))
                tests = [r["test"] for r in runs.values()]
                out["heads"][kind] = {
                    "test_mean": round(statistics.mean(tests), 4),
                    "test_stdev": round(statistics.stdev(tests), 4) if len(tests) > 1
                    else None,
                    "test_last_epoch_mean": round(statistics.mean(
                        r["test_last_epoch"] for r in runs.values()), 4),
                    "seeds": runs}
                write_json_atomically(args.output, report)  # after each run
            print(task, kind, out["heads"][kind]["test_mean"], tests, flush=True)
    print("test accuracy (%), mean ± standard deviation over the seeds; the last epoch's "
          "mean in brackets")
    print("| task | bag-of-words LR | " + " | ".join(args.heads) + " |")
    print("| --- " * (2 + len(args.heads)) + "|")
    for task, out in report["tasks"].items():
        cells = [f"{100 * h['test_mean']:.1f}"
                 + (f" ± {100 * h['test_stdev']:.1f}" if h["test_stdev"] is not None else "")
                 + f" ({100 * h['test_last_epoch_mean']:.1f})"
                 for h in (out["heads"][k] for k in args.heads)]
        print(f"| {task} | {100 * out['bag_of_words_logistic_regression']['score']:.1f} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
