"""The `elmo-tf` command line's commands: their names, one-line helps and descriptions, and the
parser without their flags (`elmo_tf.cli` adds those). Beside the `elmo_tf` package, not in it,
and importing neither TensorFlow nor `elmo_tf`: `elmo_tf_launcher` answers `--help`,
`--version` and a mistyped command from it at once.

Example:
>>> parser, commands = command_parser()
>>> sorted(commands)[:3]
['dump', 'embed', 'evaluate']
"""

import argparse

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
    # No abbreviated flags: `--step 10` is not silently `--steps 10` (and a flag added later
    # cannot change what an abbreviation in someone's script means).
    parser = argparse.ArgumentParser(prog=PROG, description="ELMo in TensorFlow 2 / Keras 3.",
                                     allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return parser, {name: commands.add_parser(name, help=help_, description=description,
                                              allow_abbrev=False)
                    for name, (help_, description) in COMMANDS.items()}


def version():
    """`elmo_tf.__version__` without importing the package: read from its source (installed,
    editable or a source tree on the path), else from the installed package's metadata."""
    import importlib.util
    import re

    try:
        with open(importlib.util.find_spec("elmo_tf").origin, encoding="utf-8") as f:
            return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)
    except (AttributeError, OSError, ValueError):  # no source, or not as expected
        from importlib import metadata

        return metadata.version(PROG)
