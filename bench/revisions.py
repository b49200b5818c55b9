"""Speed of this tree against an earlier revision, measured in the same run (CPU or GPU).

    python bench/revisions.py --baseline REV [--repeats 3] [--output FILE]

Checks REV out into a temporary git worktree, then alternates fresh processes of the two trees
(baseline, current, baseline, ...), each importing its own `elmo_tf` and timing:

* inference: `ElmoBackbone(original).embed` (random weights, seed 0) at 1x20, 32x20 and 64x40
  tokens, the best of 3 runs after a warm-up;
* training: the median `fit` step of `tiny` (32 x 20 stream batches, 340 words, full softmax) and
  of `elmo_small` (32 x 20, the released 793,471-word vocabulary, 8192 sampled negatives), as
  `build_language_model` compiles them, on synthetic batches (`bench/training.py`'s);
* fine-tuning: the first `fit` call of 2 steps (everything `fit` does before its first step
  included), the first and the median `fit` step, a later `fit` call of 2 steps and the
  median `train_on_batch` call of a `TextClassifier` on a frozen biLM of
  `elmo_cpu`'s shape (random weights), the probes' head (`finetune`'s with 64 BiLSTM units), 32
  synthetic texts of 20 words, without XLA, then compiled (`_xla`; its first step follows the
  process's first fit of the classifier, so compare each across trees, not with each other);
* commands: the CPU seconds (user + system) of a whole `elmo-tf` process, each a fresh one,
  as a user runs them on tiny inputs: `init --preset tiny`, `train` of `tiny` for 4 steps on
  600 generated sentences (with a held-out file), `embed` of 4 sentences, `export`, and
  `finetune` of a classifier for 1 epoch on 16 texts (`command_cpu_*`). There start-up and
  tracing are most of the cost, not the steps.

Machines are noisy and differ between sessions, so the figures that matter are the ratios
current / baseline of the medians over repeats, written with every sample to the JSON
(default `bench/results/revisions-<device>.json`).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ((1, 20), (32, 20), (64, 40))
TRAINING = {"tiny": {"batch": 32, "vocabulary": 340},
            "elmo_small": {"batch": 32, "vocabulary": 793_471}}
PREFIX = "MEASURED "


def measure(tree):
    """Runs in a child whose `elmo_tf` is `tree`'s; prints one JSON line of seconds."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, tree)  # its elmo_tf (and its bench helpers, the same functions)
    import dataclasses

    import keras
    import numpy as np

    import elmo_tf
    from bench.inference import best_seconds, sentences
    from bench.training import dataset, fit_steps, synthetic_batch
    from elmo_tf.recipes.recipe import Recipe
    try:
        from elmo_tf.training import build_language_model
    except ImportError:  # revisions from before the training package
        from elmo_tf.recipes.training import build_language_model

    assert os.path.dirname(os.path.dirname(os.path.abspath(elmo_tf.__file__))) == tree
    import tensorflow as tf

    seconds = {}
    keras.utils.set_random_seed(0)
    backbone = elmo_tf.ElmoBackbone(elmo_tf.ElmoConfig.from_preset("original"))
    for batch, steps in SHAPES:
        ids = elmo_tf.tokens_to_char_ids(sentences(batch, steps, seed=batch))
        run = lambda: backbone.embed(ids)["layers"].numpy()  # noqa: E731
        run()
        seconds[f"embed_{batch}x{steps}"] = best_seconds(run, 3)
    for name, config in TRAINING.items():
        recipe = dataclasses.replace(Recipe.from_name(name), batch_size=config["batch"],
                                     window=20)
        keras.utils.set_random_seed(0)
        lm = build_language_model(recipe, config["vocabulary"])
        x, y = synthetic_batch(config, recipe)
        data = dataset(x, y, tf.distribute.get_strategy(), 1)
        fit_steps(lm, data, 2)
        seconds[f"fit_step_{name}"] = float(np.median(fit_steps(lm, data, 4).seconds))
    # Fine-tuning on a frozen biLM of `elmo_cpu`'s shape, as the protocol's probes train a
    # classifier (a trained mix, a BiLSTM head of 64 units where `finetune`'s default is 512,
    # 64-dim task words, dropout 0.5): 32 texts of 20 words a step, its preprocessor's
    # features in. A revision from before the KerasHub task models (their `TaskPreprocessor`)
    # times no fine-tuning (ratios are of what both trees timed).
    try:
        from elmo_tf.models.downstream import TaskPreprocessor, TextClassifier
    except ImportError:
        print(PREFIX + json.dumps(seconds), flush=True)
        return
    texts = [" ".join(words) for words in sentences(32, 20, seed=5)]
    # Its first step (tracing; with XLA, compiling) apart, then the steady one.
    for suffix, xla in (("", "off"), ("_xla", "on")):
        keras.utils.set_random_seed(0)
        embedding = elmo_tf.ElmoEmbedding(elmo_tf.ElmoBackbone(
            elmo_tf.ElmoConfig.from_architecture("elmo_cpu")))
        classifier = TextClassifier.create(embedding, ["a", "b"], "whitespace", 64, 0.5,
                                           word_embedding_dim=64)
        classifier.compile(xla=xla)
        assert isinstance(classifier.preprocessor, TaskPreprocessor)
        data = tf.data.Dataset.from_tensors((
            classifier.preprocessor(classifier.inputs_for(texts)),
            classifier.targets([0, 1] * 16))).repeat()
        started = time.perf_counter()
        first = fit_steps(classifier, data, 2)
        # The whole first `fit` of 2 steps (what `fit` does before its first step included),
        # then its first step alone (from the step's beginning to its end).
        seconds[f"first_fit_frozen_classifier{suffix}"] = time.perf_counter() - started
        seconds[f"first_step_frozen_classifier{suffix}"] = first.seconds[0]
        seconds[f"fit_step_frozen_classifier{suffix}"] = float(np.median(
            fit_steps(classifier, data, 40).seconds))  # 50-100 ms steps: more of them
        # A later `fit` call of 2 steps, whole, and `train_on_batch` (the median of 10 calls,
        # after one): what Keras does again before each call (its symbolic build of a model
        # that has an unbuilt layer) shows here.
        started = time.perf_counter()
        fit_steps(classifier, data, 2)
        seconds[f"later_fit_frozen_classifier{suffix}"] = time.perf_counter() - started
        x, y = next(iter(data))
        classifier.train_on_batch(x, y)
        calls = []
        for _ in range(10):
            started = time.perf_counter()
            classifier.train_on_batch(x, y)
            calls.append(time.perf_counter() - started)
        seconds[f"train_on_batch_frozen_classifier{suffix}"] = float(np.median(calls))
    seconds.update(command_seconds(tree))
    print(PREFIX + json.dumps(seconds), flush=True)


def command_seconds(tree):
    """The CPU seconds of each tiny `elmo-tf` command (module doc), run in order in fresh
    processes whose `elmo_tf` is `tree`'s."""
    import resource

    from elmo_tf.data.generated_corpus import write_generated_corpus

    environ = {**os.environ, "PYTHONPATH": tree, "TF_CPP_MIN_LOG_LEVEL": "3"}
    seconds = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = write_generated_corpus(os.path.join(tmp, "corpus"), n_sentences=600,
                                        n_heldout=100, n_shards=1)
        with open(os.path.join(tmp, "train.tsv"), "w") as f:
            f.writelines(f"{label}\t{label} film number {i}\n"
                         for i in range(8) for label in ("good", "bad"))
        with open(os.path.join(tmp, "sentences.txt"), "w") as f:
            f.write("the cat sat .\na dog ran off\nhello\nso it goes on and on\n")
        model, run = os.path.join(tmp, "model"), os.path.join(tmp, "run")
        commands = {
            "init": ["init", "--preset", "tiny", "--output", model],
            "train": ["train", "--recipe", "tiny", "--corpus", corpus["train"], "--validation",
                      corpus["heldout"], "--steps", "4", "--output", run],
            "embed": ["embed", "--model", model, "--output", os.path.join(tmp, "v.hdf5")],
            "export": ["export", "--model", model, "--output", os.path.join(tmp, "serving")],
            "finetune": ["finetune", "--task", "classify", "--train",
                         os.path.join(tmp, "train.tsv"), "--dev",
                         os.path.join(tmp, "train.tsv"), "--model", model, "--epochs", "1",
                         "--output", os.path.join(tmp, "classifier")]}
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            with open(os.path.join(tmp, "sentences.txt")) as stdin:
                subprocess.run([sys.executable, "-m", "elmo_tf_launcher", *argv], env=environ,
                               cwd=tmp, stdin=stdin, capture_output=True, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds[f"command_cpu_{name}"] = (after.ru_utime - before.ru_utime
                                              + after.ru_stime - before.ru_stime)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="the git revision to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=None)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # child: the tree to time
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return
    if not args.baseline:
        parser.error("--baseline REV is required")
    sys.path.insert(0, ROOT)
    from bench.inference import machine, versions

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        baseline_tree = os.path.join(tmp, "baseline")
        subprocess.run(["git", "worktree", "add", "--detach", baseline_tree, args.baseline],
                       cwd=ROOT, check=True, capture_output=True)
        try:
            trees = {"baseline": baseline_tree, "current": ROOT}
            samples = {name: [] for name in trees}
            for repeat in range(args.repeats):
                for name, tree in trees.items():
                    done = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), "--measure", tree],
                        capture_output=True, text=True, check=False)
                    lines = [line for line in done.stdout.splitlines()
                             if line.startswith(PREFIX)]
                    if done.returncode or not lines:
                        sys.exit(f"{name} tree failed:\n{done.stderr[-3000:]}")
                    samples[name].append(json.loads(lines[-1][len(PREFIX):]))
                    print(f"repeat {repeat + 1}/{args.repeats} {name}: {samples[name][-1]}",
                          flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", baseline_tree], cwd=ROOT,
                           check=False, capture_output=True)
    import numpy as np

    keys = [k for k in samples["current"][0] if k in samples["baseline"][0]]  # both timed
    medians = {name: {k: float(np.median([s[k] for s in runs])) for k in keys}
               for name, runs in samples.items()}
    ratios = {k: medians["current"][k] / medians["baseline"][k] for k in keys}
    info = machine()
    report = {"benchmark": "revisions", "what": "seconds (lower is better) of the same work by "
              "two revisions, alternated in one run; ratio = current / baseline",
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "command": " ".join(["python"] + sys.argv), "baseline": args.baseline,
              "machine": info, "versions": versions(), "repeats": args.repeats,
              "seconds_median": medians, "current_over_baseline": ratios, "samples": samples,
              "wall_seconds": time.perf_counter() - started}
    device = "gpu" if info["gpus"] else "cpu"
    output = args.output or os.path.join(ROOT, "bench", "results", f"revisions-{device}.json")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w") as f:
        json.dump(report, f, indent=2)
    for k in keys:
        print(f"{k:36s} baseline {medians['baseline'][k]:8.3f} s  current "
              f"{medians['current'][k]:8.3f} s  ratio {ratios[k]:.3f}")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
