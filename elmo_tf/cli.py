"""The `elmo-tf` command line.

    elmo-tf vocab --corpus GLOB --output vocab.txt  # frequency-sorted, bilm-tf's format
    elmo-tf train --recipe tiny --corpus builtin --output DIR   # pre-train (resumes if killed)
    elmo-tf evaluate --model DIR --corpus GLOB     # full-softmax perplexities
    elmo-tf init --preset elmo_small --output DIR  # a random model in the released layout
    elmo-tf dump sentences.txt vectors.hdf5 --model DIR [--layers all|top|average]
    elmo-tf embed --model DIR --output vectors.hdf5  # dump --layers all, from stdin
    elmo-tf export --model DIR --output serving/elmo # a SavedModel: serving/elmo/1/
    elmo-tf finetune --task glue/sst2 --data-dir glue_data --model DIR --output OUT
    elmo-tf predict --model OUT [FILE]              # one label (tags, score) per line
"""

import argparse
import contextlib
import contextvars
import logging
import os
import re
import signal
import sys
import threading

from elmo_tf_commands import PROG, command_parser

_RESULTS = contextvars.ContextVar("results", default=None)  # the stdout of `main`'s caller


def main(argv=None):
    """Runs the command of `argv` (default: `sys.argv[1:]`); returns its exit status. An error
    a user can cause is one line on stderr (status 2), never a traceback.

    Example:
    >>> main(["init", "--preset", "tiny", "--output", "model"])
    0
    """
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # after the command: under its usage (its flags); before it: the whole one's
        message = f"unrecognized arguments: {' '.join(unknown)}"
        if set(unknown) & set(argv[:argv.index(args.command)]):
            parser.error(message)
        next(a for a in parser._actions if a.dest == "command").choices[args.command].error(
            message)
    for name in ("output", "json"):  # what the command writes: local files only
        value = getattr(args, name, None)
        if value is not None and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", value):
            parser.exit(2, f"{PROG}: error: {_flag(args, name)} {value} is a URL; elmo-tf "
                           "writes to local paths only (write locally, then copy, e.g. gcloud "
                           "storage cp -r).\n")
    # Results on stdout; progress bars (Keras prints them on stdout) and log lines on stderr.
    results = _RESULTS.set(_RESULTS.get() or sys.stdout)  # (a nested main: the outer one's)
    with _library_log_on_stderr(), contextlib.redirect_stdout(sys.stderr):
        try:
            return args.run(args)
        except (ValueError, TypeError, OSError, ImportError, FloatingPointError) as error:
            parser.exit(2, f"{PROG}: error: {error}\n")
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM in `main_process`
            terminated = isinstance(stop, Terminated)
            parser.exit(143 if terminated else 130,
                        f"{PROG}: {'terminated' if terminated else 'interrupted'}; "
                        f"{_kept(args)}\n")
        except Exception as error:
            if not _is_input_error(error):
                raise
            parser.exit(2, f"{PROG}: error: {_input_error_message(error)}\n")
        finally:
            _RESULTS.reset(results)


def _flag(args, name):
    """How the command line names the argument `name` (`dump`'s output is positional)."""
    return name if args.command == "dump" else f"--{name}"


def _say(*parts):
    """Prints a command's result on the command's stdout (`main` sends everything else that
    prints there, Keras's progress bars, to stderr)."""
    print(*parts, file=_RESULTS.get() or sys.stdout, flush=True)


def main_process(argv=None):
    """`main` as a process's whole work (`elmo_tf_launcher.main`, which is `elmo-tf` and
    `python -m elmo_tf`; `python -m elmo_tf.cli`): its temporary files (TensorFlow's AutoGraph
    files among them) in a directory of its own, which the next command removes if this one is
    killed."""
    from elmo_tf.files import private_temporary_directory

    try:
        with private_temporary_directory(), _sigterm_as_interrupt():
            return main(argv)
    except Terminated:  # outside `main`'s own handling (while it parsed or reported)
        print(f"{PROG}: terminated", file=sys.stderr)
        return 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, a batch scheduler's stop) while `main_process` runs: raised in the main
    thread, so that the command ends as on Ctrl-C (its locks released, its temporaries removed,
    one line saying what was kept), with exit status 143 (128 + SIGTERM)."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises `Terminated` inside the block (where SIGTERM has Python's default
    action, and in the main thread, the only one that can handle signals); restored after."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _is_input_error(error):
    """Whether `error` is TensorFlow's error from reading a file (one that vanished, became
    unreadable or is damaged while a pipeline read it), which `main` reports in one line;
    any other (a model's bug, a device out of memory) keeps its traceback."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(error, (tf.errors.NotFoundError,
                                                 tf.errors.PermissionDeniedError,
                                                 tf.errors.DataLossError))


def _input_error_message(error):
    """TensorFlow's message without the op it came from: it names the file and the reason
    (`corpus.txt; No such file or directory`)."""
    message = re.sub(r"\{\{.*?\}\}\s*", "", error.message.split("\n\t")[0]).strip()
    return f"reading the input failed: {message.split(' [Op:')[0]}"


def _kept(args):
    """What an interrupted command leaves, for the message: a run's kept checkpoints (and how
    to resume), or that nothing is half-written."""
    output = getattr(args, "output", None)
    if args.run not in (_train, _finetune) or output is None:
        return "no file was left half-written."
    from elmo_tf.training.checkpoints import CheckpointFiles

    directory = os.path.join(output, "checkpoints")
    number, path = (CheckpointFiles(directory).newest() if args.run is _train else
                    CheckpointFiles(directory, prefix="epoch", digits=3).newest())
    if path is None:
        return (f"{output} holds no checkpoint yet; the same command starts the run again."
                if os.path.isdir(output) else "nothing was written.")
    unit = "step" if args.run is _train else "epoch"
    return (f"kept {path} ({unit} {number}); the same command resumes the run from it.")


@contextlib.contextmanager
def _library_log_on_stderr():
    """The library's INFO messages (resuming, steps per pass, skipped corpus lines) on stderr,
    while a command runs; the logger is left as it was."""
    log = logging.getLogger("elmo_tf")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _parser():
    # Every list of choices comes from the registry that owns it.
    from elmo_tf.text.tokenizers import TOKENIZERS
    from elmo_tf.export.embeddings_hdf5 import LAYERS
    from elmo_tf.models.family import preset_names
    from elmo_tf.recipes.recipe import Recipe
    from elmo_tf.training import MIXED_PRECISION, STRATEGIES, XLA_MODES
    from elmo_tf.training.pretraining import XLA_CPU_MIN_MINUTES, XLA_CPU_MIN_STEPS

    parser, commands = command_parser()  # the commands; their flags here

    init = commands["init"]
    init.add_argument("--preset", required=True, metavar="PRESET",
                      help=f"one of {', '.join(preset_names())} (ELMo's released shapes also "
                           "as small, medium, original)")
    init.add_argument("--output", required=True, metavar="DIR",
                      help="the directory to write")
    init.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    init.set_defaults(run=_init)

    vocab = commands["vocab"]
    _corpus_arguments(vocab, TOKENIZERS)
    vocab.add_argument("--output", required=True, metavar="VOCAB", help="the file to write")
    vocab.add_argument("--min-count", type=_positive_int, default=1,
                       help="leave out words seen fewer times (default 1)")
    vocab.add_argument("--max-size", type=_positive_int,
                       help="at most this many entries, the 3 specials included")
    vocab.set_defaults(run=_vocab)

    train = commands["train"]
    train.add_argument("--recipe", required=True,
                       help=f"{', '.join(Recipe.names())}, or a recipe .json")
    _corpus_arguments(train, TOKENIZERS, builtin=True)
    train.add_argument("--output", required=True, metavar="DIR",
                       help="the run's directory (the same command resumes it)")
    train.add_argument("--vocab", help="vocab file (default: built from the corpus)")
    train.add_argument("--validation", metavar="GLOB",
                       help="held-out corpus evaluated at every checkpoint (default for "
                            "builtin: its held-out part)")
    train.add_argument("--strategy", choices=STRATEGIES, default="default",
                       help="mirrored: all local GPUs (or --cpu-replicas logical CPUs); "
                            "multi-worker: the cluster in TF_CONFIG")
    train.add_argument("--cpu-replicas", type=_positive_int, default=2,
                       help="logical CPU devices for --strategy mirrored without GPUs (default 2)")
    length = train.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=_positive_int,
                        help="passes over the corpus in all (a resumed run trains what is left; "
                             "default: a resumed run's own steps or minutes, else the recipe's "
                             "steps, elmo_cpu 3,700, else its epochs)")
    length.add_argument("--steps", type=_positive_int,
                        help="optimizer steps in all (a resumed run trains what is left)")
    length.add_argument("--minutes", type=_positive_float,
                        help="a wall-clock budget: train until this many minutes in all "
                             "(recorded in run.json; a resumed run trains what is left)")
    train.add_argument("--checkpoint-every", type=_positive_int, metavar="STEPS",
                       help="steps between checkpoints (default: an epoch, at most 1000)")
    train.add_argument("--mixed-precision", choices=[k for k in MIXED_PRECISION if k],
                       help="Keras mixed precision (bfloat16 on CPU; float16 or bfloat16 on GPU)")
    train.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    train.add_argument("--xla", choices=XLA_MODES,
                       help="compile each replica's training step with XLA: auto (the default "
                            "of a new run) = on when the replicas are GPUs, with or without "
                            "--strategy, and on CPUs for a run long enough to win back the "
                            f"compilation (at least {XLA_CPU_MIN_STEPS:,} steps, or "
                            f"--minutes {XLA_CPU_MIN_MINUTES}); a resumed run keeps what it "
                            "was started with")
    train.set_defaults(run=_train)

    evaluate = commands["evaluate"]
    evaluate.add_argument("--model", required=True, metavar="DIR",
                          help="a finished training run's directory (its language model)")
    _corpus_arguments(evaluate, TOKENIZERS, builtin=True)
    evaluate.add_argument("--json", metavar="FILE", help="also write the results here")
    evaluate.set_defaults(run=_evaluate)

    dump = commands["dump"]
    dump.add_argument("input", help="sentence file, or - for stdin")
    dump.add_argument("output", help="the .hdf5 file to write (atomically)")
    _model_arguments(dump)
    dump.add_argument("--layers", choices=LAYERS, default="all",
                      help="all: [n_layers + 1, n_tokens, 2P] per sentence (default); top: the "
                           "top LSTM layer; average: the mean of all layers ([n_tokens, 2P])")
    _batch_size_argument(dump)
    dump.set_defaults(run=_dump)

    embed = commands["embed"]
    _model_arguments(embed)
    embed.add_argument("--input", default="-", help="sentence file, or - for stdin (default)")
    embed.add_argument("--output", required=True, help="the .hdf5 file to write")
    _batch_size_argument(embed)
    embed.set_defaults(run=_dump, layers="all")

    export = commands["export"]
    _model_arguments(export, more=", or a `finetune` output directory (its task preset)")
    export.add_argument("--output", required=True, metavar="EXPORT_BASE",
                        help="the model's base directory; the SavedModel goes to a version "
                             "directory inside it, as TF Serving expects")
    export.add_argument("--version", type=_positive_int,
                        help="version directory to create (default: one more than the highest)")
    export.add_argument("--fine-tune-bilm", action="store_true",
                        help="mark the biLM's weights trainable too (default: only the mix)")
    export.add_argument("--dropout", type=float, default=0.0,
                        help="dropout on `elmo` when called with training=True (default 0)")
    export.set_defaults(run=_export)

    from elmo_tf.training.finetuning import TASKS

    finetune = commands["finetune"]
    finetune.add_argument("--task", required=True, choices=TASKS, metavar="TASK",
                          help="glue/NAME (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli: "
                               "GLUE's files in --data-dir), or classify / pair "
                               "(label<TAB>text[<TAB>text_b] files) or tag (CoNLL files) with "
                               "--train and --dev")
    finetune.add_argument("--model", required=True, metavar="DIR",
                          help="the biLM: a directory with options.json and weights.hdf5")
    finetune.add_argument("--output", required=True, help="the fine-tuning run's directory")
    finetune.add_argument("--data-dir", help="GLUE's data directory (DIR/SST-2/train.tsv, ...)")
    finetune.add_argument("--tfds-data-dir",
                          help="or where TFDS's glue/NAME is prepared (never downloaded)")
    finetune.add_argument("--train", help="training file (classify, pair, tag)")
    finetune.add_argument("--dev", help="dev file, for early stopping (classify, pair, tag)")
    finetune.add_argument("--test", help="test file, scored when the run ends with the best "
                                         "dev epoch's weights and the last epoch's; never "
                                         "chosen on (classify, pair, tag)")
    finetune.add_argument("--header", action="store_true",
                          help="classify, pair: each file's first line is a header, skipped")
    finetune.add_argument("--tokenizer", choices=["whitespace", "wordpunct"],
                          help="how raw text becomes tokens (default: as the biLM's corpus was "
                               "tokenized, from its run.json; else whitespace)")
    finetune.add_argument("--epochs", type=_positive_int, default=10, help="at most (10)")
    finetune.add_argument("--patience", type=_positive_int, default=3,
                          help="epochs without a better dev score before stopping (3)")
    finetune.add_argument("--batch-size", type=_positive_int, default=32, help="(32)")
    finetune.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's (0.001)")
    finetune.add_argument("--encoder-units", type=_positive_int, default=512,
                          help="the task BiLSTM's units per direction (512)")
    finetune.add_argument("--dropout", type=float, default=0.5, help="(0.5)")
    finetune.add_argument("--fine-tune-bilm", action="store_true",
                          help="train the biLM's weights too (default: the mix and the head)")
    finetune.add_argument("--scalar-mix-parameters", type=_floats, metavar="W0,W1,...",
                          help="fixed pre-softmax weights of the biLM's layers instead of a "
                               "trained mix (1,-9e10,-9e10: layer 0 alone)")
    finetune.add_argument("--word-embedding-dim", type=_non_negative_int, metavar="N",
                          help="classify and GLUE's single-sentence tasks: a bag of word "
                               "embeddings trained on the task beside ELMo (64; 0: ELMo alone)")
    finetune.add_argument("--seed", type=int, default=0,
                          help="initialisation, dropout and batch order (default 0)")
    finetune.add_argument("--xla", choices=XLA_MODES, default="auto",
                          help="compile the task model with XLA (its preprocessor reads the "
                               "text in the input pipeline): auto (the default) = on when the "
                               "device is a GPU, off on CPUs")
    finetune.add_argument("--strategy", choices=[s for s in STRATEGIES if s != "multi-worker"],
                          default="default",
                          help="mirrored: all local GPUs (or --cpu-replicas logical CPUs), "
                               "--batch-size being the global batch")
    finetune.add_argument("--cpu-replicas", type=_positive_int, default=2,
                          help="logical CPU devices for --strategy mirrored without GPUs "
                               "(default 2)")
    finetune.set_defaults(run=_finetune)

    predict = commands["predict"]
    predict.add_argument("--model", required=True, metavar="OUT",
                         help="a finetune output directory (or a .keras file of an earlier "
                              "version)")
    predict.add_argument("input", nargs="?", default="-", help="input file (default stdin)")
    predict.add_argument("--scores", action="store_true",
                         help="print the probabilities too: after a label, <TAB>name=p for "
                              "every class; a tagger's tags as tag=p")
    predict.set_defaults(run=_predict)
    return parser


def _model_arguments(command, more=""):
    group = command.add_mutually_exclusive_group(required=True)
    group.add_argument("--model", metavar="DIR",
                       help="a directory with options.json and weights.hdf5 (what `init` and "
                            "training write)" + more)
    group.add_argument("--options", help="options.json of the model (with --weights)")
    command.add_argument("--weights", help="weights.hdf5 in the released layout (with --options)")


def _corpus_arguments(command, tokenizers, builtin=False):
    command.add_argument(
        "--corpus", required=True,
        help="file glob (one sentence per line, e.g. the 1B Word Benchmark's shards), "
             "tfds:NAME for a TFDS dataset prepared in --tfds-data-dir"
             + (", or builtin: the generated corpus with a known best perplexity" if builtin
                else ""))
    command.add_argument("--tokenizer", choices=tokenizers,
                         default=None if builtin else "whitespace",
                         help="how lines become tokens (default whitespace: pre-tokenized text)")
    command.add_argument("--tfds-data-dir", help="where tfds:NAME is prepared (no downloads)")


def _batch_size_argument(command):
    command.add_argument("--batch-size", type=_positive_int, default=64,
                         help="sentences per forward pass (default 64)")


def _model_files(args):
    if args.model is not None:
        from elmo_tf.training.finetuning import check_bilm_directory

        if args.weights is not None:
            raise ValueError("give either --model DIR or --options and --weights, not both.")
        check_bilm_directory(args.model)
        return os.path.join(args.model, "options.json"), os.path.join(args.model, "weights.hdf5")
    if args.weights is None:
        raise ValueError("--options needs --weights (or give --model DIR).")
    return args.options, args.weights


def _integer(text, accepted):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {accepted}; got {text!r}") from None


def _positive_int(text):
    from elmo_tf.checks import positive_int_problems

    value = _integer(text, "a positive integer")
    if positive_int_problems(value=value):
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {value}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number; got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number; got {text!r}")
    return value


def _non_negative_int(text):
    value = _integer(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {value}")
    return value


def _floats(text):
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be numbers separated by commas (e.g. 1,-9e10,-9e10); got {text!r}") from None


def _read_sentences(path):
    """Lines of `path` (or stdin) split on ASCII whitespace, as the served `default` signature
    splits (`tf.strings.split`); a line that is not UTF-8 is an error naming it."""
    from elmo_tf.files import utf8_lines

    return [[token.decode("utf-8") for token in line.encode("utf-8").split()]
            for line in utf8_lines(path)]


def _finetune(args):
    from elmo_tf import training

    strategy = training.make_strategy(args.strategy, args.cpu_replicas)  # before TF starts
    from elmo_tf.training.finetuning import finetune

    results = finetune(args.task, args.model, args.output, data_dir=args.data_dir,
                       tfds_data_dir=args.tfds_data_dir, train=args.train, test=args.test,
                       header=args.header, tokenizer=args.tokenizer, dev=args.dev,
                       epochs=args.epochs,
                       patience=args.patience, batch_size=args.batch_size,
                       learning_rate=args.learning_rate, encoder_units=args.encoder_units,
                       dropout=args.dropout, fine_tune_bilm=args.fine_tune_bilm,
                       scalar_mix_parameters=args.scalar_mix_parameters,
                       word_embedding_dim=args.word_embedding_dim, seed=args.seed,
                       xla=args.xla, strategy=strategy)
    def scores(split):  # a binary F1 names its class: `f1 (of 'pos') 0.8000`
        return ", ".join(f"f1 (of {results['f1_label']!r}) {v:.4f}" if k == "f1" else
                         f"{k} {v:.4f}" for k, v in results[split].items())

    _say(f"best epoch {results['best_epoch']} of {results['epochs']}: dev {scores('dev')}")
    if "test" in results:
        _say(f"test (best dev epoch): {scores('test')}; last epoch: "
             f"{scores('test_last_epoch')}")
    if "dev_mismatched" in results:
        _say(f"dev mismatched: {scores('dev_mismatched')}")
    _say(f"wrote {args.output}/task.json (a KerasHub task preset), dev_metrics.json")
    return 0


def _predict(args):
    from elmo_tf.files import utf8_lines
    from elmo_tf.training.finetuning import load_task_model, predictions

    lines = utf8_lines(args.input)  # a wrong path first: not after loading the model
    model = load_task_model(args.model)
    source = "stdin" if args.input == "-" else args.input
    for prediction in predictions(model, lines, source=source, scores=args.scores):
        _say(prediction)
    return 0


def _dump(args):
    from elmo_tf.export.embeddings_hdf5 import write_embeddings
    from elmo_tf.models.load_backbone import load_backbone

    files = _model_files(args)  # a wrong --model first: not after waiting on stdin
    if os.path.isdir(args.output):  # before the work, not at the rename after it
        raise ValueError(f"{_flag(args, 'output')} {args.output} is a directory: give the path "
                         "of the .hdf5 file to write.")
    for name, path in (("the input file", args.input), ("the model's options", files[0]),
                       ("the model's weights", files[1])):  # never replaced by the vectors
        if path != "-" and os.path.exists(path) and os.path.exists(args.output) and \
                os.path.samefile(path, args.output):
            raise ValueError(f"{_flag(args, 'output')} {args.output} is {name}: give another "
                             "path for the vectors; nothing was written.")
    sentences = _read_sentences(args.input)
    if not sentences:
        source = "stdin" if args.input == "-" else args.input
        raise ValueError(f"{source} has no lines: give one sentence per line (tokens separated "
                         "by spaces; an empty line is an empty sentence); nothing was written.")
    backbone = load_backbone(*files)
    tokens = write_embeddings(backbone, sentences, args.output, layers=args.layers,
                              batch_size=args.batch_size)
    layers, width = backbone.num_layers, backbone.output_dim
    shape = f"[{layers}, n_tokens, {width}]" if args.layers == "all" else f"[n_tokens, {width}]"
    count = lambda n, noun: f"{n:,} {noun}{'s' * (n != 1)}"
    _say(f"wrote {count(len(sentences), 'sentence')} ({count(tokens, 'token')}) to "
         f"{args.output}: dataset 'i' = float32 {shape} for sentence i, and 'sentence_to_index'")
    return 0


def _export(args):
    from elmo_tf.export.saved_model import export_saved_model
    from elmo_tf.models.elmo_embedding import ElmoEmbedding

    from elmo_tf.training.finetuning import is_task_directory, load_task_model

    if args.model is not None and is_task_directory(args.model):  # a `finetune` run
        from elmo_tf.export.task_saved_model import export_task_model

        if args.fine_tune_bilm or args.dropout:
            raise ValueError("--fine-tune-bilm and --dropout are for a biLM's export; "
                             f"{args.model} is a fine-tuned task model.")
        path = export_task_model(load_task_model(args.model), args.output,
                                 version=args.version)
        _say(f"wrote a SavedModel to {path} (signature serving_default: raw text in, logits "
              "and the prediction out)")
        return 0
    embedding = ElmoEmbedding.from_allennlp(*_model_files(args), dropout=args.dropout,
                                            fine_tune=args.fine_tune_bilm)
    path = export_saved_model(embedding, args.output, version=args.version)
    _say(f"wrote a SavedModel to {path} (signatures: serving_default, tokens, default)")
    return 0


def _vocab(args):
    from elmo_tf.data.corpus import corpus_identity
    from elmo_tf.data.vocabulary_counts import build_vocabulary

    corpus_identity(args.corpus, args.tfds_data_dir, log=True)  # checked, and its files said

    vocabulary = build_vocabulary(args.corpus, min_count=args.min_count, max_size=args.max_size,
                                  tokenizer=args.tokenizer, tfds_data_dir=args.tfds_data_dir)
    vocabulary.save(args.output)
    _say(f"wrote {len(vocabulary):,} tokens (3 specials + words by frequency) to {args.output}")
    return 0


def _train(args):
    from elmo_tf import training

    strategy = training.make_strategy(args.strategy, args.cpu_replicas)  # before TF starts
    results = training.train(
        args.recipe, args.corpus, args.output, vocabulary=args.vocab, strategy=strategy,
        epochs=args.epochs, steps=args.steps, minutes=args.minutes, seed=args.seed,
        mixed_precision=args.mixed_precision, validation=args.validation,
        checkpoint_every=args.checkpoint_every, tokenizer=args.tokenizer or "whitespace",
        tfds_data_dir=args.tfds_data_dir, xla=args.xla)
    spent = (f" in {results['trained_minutes']:g} minutes" if "trained_minutes" in results
             else "")
    _say(f"trained {results['steps']} steps{spent}; wrote {args.output}/options.json, "
          "weights.hdf5, vocab.txt and a KerasHub preset (config.json, model.weights.h5)")
    if "validation" in results:
        family = training.RunDirectory(args.output).recipe().family
        _print_perplexities("held-out", results["validation"], family,
                            results.get("best_perplexity"))
    return 0


def _evaluate(args):
    import json

    from elmo_tf import training

    results = training.evaluate(args.model, args.corpus, tokenizer=args.tokenizer,
                                tfds_data_dir=args.tfds_data_dir)
    _print_perplexities(args.corpus, results, training.RunDirectory(args.model).recipe().family,
                        results.get("best_perplexity"))
    if args.json:
        from elmo_tf.files import write_json_atomically

        write_json_atomically(args.json, results)
    _say(json.dumps(results))
    return 0


def _print_perplexities(name, results, family, best=None):
    line = f"{name} {family.describe(results)}"
    if best is not None:
        line += f" (the generated language's best possible: {best:.2f})"
    _say(line)


def _init(args):
    import keras

    from elmo_tf.files import names_a_file
    from elmo_tf.models.backbone import Backbone
    from elmo_tf.training.run_directory import write_model_files

    if names_a_file(args.output):
        raise ValueError(f"--output {args.output} is a file: `init` writes a model directory "
                         "(made if absent); give another path.")
    # A model's directory (a trained run's, say) is never overwritten with random weights.
    taken = [name for name in ("options.json", "weights.hdf5", "config.json", "run.json",
                               "task.json") if os.path.exists(os.path.join(args.output, name))]
    if taken:
        raise ValueError(f"--output {args.output} already holds a model ({', '.join(taken)}): "
                         "`init` writes a new random one; give a new or empty directory.")
    keras.utils.set_random_seed(args.seed)
    backbone = Backbone.from_architecture(args.preset)
    write_model_files(backbone, args.output)
    _say(f"wrote a random {args.preset} {type(backbone).__name__} "
          f"({backbone.count_params():,} parameters, seed {args.seed}) to {args.output} "
          "(options.json and weights.hdf5, and a KerasHub preset: config.json, "
          "metadata.json, model.weights.h5)")
    return 0


if __name__ == "__main__":
    sys.exit(main_process())
