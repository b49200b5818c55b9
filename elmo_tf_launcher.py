"""The `elmo-tf` command's entry point (pip's `console_scripts`), outside the `elmo_tf` package.

`import elmo_tf` imports TensorFlow: the package registers its Keras objects as it is imported,
so that `keras.saving` and KerasHub's loaders find them. This module imports neither, so that
`elmo-tf --help`, `elmo-tf --version` and a mistyped command answer at once. A command that
runs imports TensorFlow with its C++ start-up lines silenced (absl's INFO lines and the probing
of CUDA drivers, printed before any log level applies, would bury the command's own output;
stderr is restored before an error of the import itself propagates), then runs
`elmo_tf.cli.main_process`. `python -m elmo_tf` runs the same command, after the package's
import (TensorFlow's lines included).

Example:
    $ elmo-tf --help            # the commands, without TensorFlow
    $ elmo-tf train --help      # a command's flags (their choices come from the registries)
    $ python -m elmo_tf_launcher init --preset tiny --output model   # the same as `elmo-tf`
"""

import argparse
import os
import sys

PROG = "elmo-tf"
# Each command's one-line help and its description; `elmo_tf.cli` adds the flags.
COMMANDS = {
    "init": (
        "write a randomly initialised model (options.json + weights.hdf5, and a "
        "KerasHub preset)",
        "Writes DIR/options.json and DIR/weights.hdf5 for a preset architecture of "
        "any model family, with its training initialisation, and the same model as "
        "a KerasHub preset (config.json, metadata.json, model.weights.h5), e.g. to "
        "try the pipeline before training or converting a model."),
    "vocab": (
        "build a vocabulary file from a corpus",
        "Counts the tokens of the corpus (streaming, with a progress bar) and writes "
        "bilm-tf's vocab format: <S>, </S>, <UNK>, then the words by decreasing "
        "frequency (the sampled softmax's log-uniform sampler relies on the order)."),
    "train": (
        "pre-train a biLM, ELMo or Masked ELMo (resumes a killed run in the same "
        "--output)",
        "Trains the recipe's biLM with model.fit and writes DIR/options.json, "
        "DIR/weights.hdf5 (released layout), the same biLM as a KerasHub preset "
        "(DIR/config.json, metadata.json, model.weights.h5), DIR/vocab.txt, "
        "checkpoints and TensorBoard logs. Run the same command again after a "
        "crash to resume from the last checkpoint."),
    "evaluate": (
        "full-softmax perplexities of a trained model on a corpus",
        "Prints forward, backward and average perplexity and writes them as JSON "
        "(--json) for a directory `elmo-tf train` wrote."),
    "dump": (
        "write the biLM vectors of every sentence of a file to hdf5",
        "Reads sentences (one per line, tokens separated by whitespace) and writes "
        "dataset 'i' per sentence i plus 'sentence_to_index', the layouts of "
        "bilm-tf's dump_bilm_embeddings and AllenNLP's `elmo --all/--top/--average`. "
        "Stateless: a sentence's vectors do not depend on its neighbours."),
    "embed": (
        "`dump --layers all`, reading stdin unless --input is given",
        "The same as `elmo-tf dump INPUT OUTPUT --layers all`."),
    "export": (
        "write a SavedModel for TF Serving and TF Hub",
        "Writes OUTPUT/VERSION/, a SavedModel with TF Hub elmo's signatures (`tokens` "
        "= `serving_default`, `default`) and outputs (word_emb, lstm_outputs1.., "
        "elmo, default, mask), the reusable SavedModel API for hub.KerasLayer and "
        "ElmoEmbedding.from_saved_model, and core TensorFlow ops only. With --model "
        "a `finetune` output directory, the task model instead: raw text in, "
        "logits and the label, score or tags out."),
    "finetune": (
        "train a task model (classifier, pairs, tagger) on a biLM",
        "Trains a downstream task model on the representations of a pre-trained "
        "biLM (ELMo or Masked ELMo), keeps the epoch with the best dev score, "
        "stops after --patience epochs without a better one, and writes "
        "the best epoch's model into OUTPUT as a KerasHub task preset (task.json, "
        "its weights) and OUTPUT/dev_metrics.json; resumes if killed."),
    "predict": (
        "run a fine-tuned model on text, one prediction per line",
        "Reads lines (a text; text_a<TAB>text_b for a pair model; tokens separated "
        "by spaces for a tagger) and prints one line per line: the label, the score "
        "or the tags."),
}


def command_parser():
    """The command line without its commands' flags: `(parser, {name: subparser})`."""
    parser = argparse.ArgumentParser(prog=PROG, description="ELMo in TensorFlow 2 / Keras 3.")
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return parser, {name: commands.add_parser(name, help=help_, description=description)
                    for name, (help_, description) in COMMANDS.items()}


def version():
    """The installed package's version (a source tree run without installing: the package's
    own, which imports TensorFlow)."""
    from importlib import metadata

    try:
        return metadata.version(PROG)
    except metadata.PackageNotFoundError:
        from elmo_tf import __version__

        return __version__


def main(argv=None):
    """Runs `elmo-tf` with `argv` (default: `sys.argv[1:]`); returns its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:  # --help, --version, a missing or unknown command
        command_parser()[0].parse_args(argv)  # prints and exits
    _import_tensorflow_quietly()
    from elmo_tf.cli import main_process

    return main_process(argv)


def _import_tensorflow_quietly():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        import tensorflow  # noqa: F401 (imported for its start-up, quietly)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


if __name__ == "__main__":
    sys.exit(main())
