"""A run's directory, pre-training or fine-tuning: one process at a time (a lock held for the
whole run), its settings (a resumed run must match them), its record, its checkpoints, and what
a killed run was writing, cleared when a run opens it. One implementation for both kinds of
run; the pre-training files too:

    run.lock                     while a process runs there: which one (`files.exclusive_lock`)
    run.json                     the settings (and the run's progress), JSON
    checkpoints/                 `CheckpointFiles`: pre-training's ckpt-STEP.weights.h5 (model +
                                 optimizer every checkpoint interval, the last 2), fine-tuning's
                                 epoch-NNN.weights.h5 (the last epoch)
    options.json                 pre-training: the family's options (architecture + training keys)
    weights.hdf5                 pre-training: the biLM in its family's files (written at the end)
    config.json, metadata.json,  pre-training: the same biLM as a KerasHub preset (inference
    model.weights.h5,            settings: stateless, no dropout; `Backbone.save_to_preset`)
    tokenizer.json, assets/      and its tokenizer (`CharIdsTokenizer`: the corpus's; no assets)
    vocab.txt                    pre-training: the softmax vocabulary, bilm-tf's format
    language_model.weights.h5    pre-training: the whole pre-training task (softmax included)
    corpus/                      pre-training: the built-in corpus, when the run trains on it
    logs/                        TensorBoard
    best.weights.h5, task.json,  fine-tuning (`elmo_tf.training.finetuning`): the best epoch's
    task.weights.h5, config.json weights until the run ends, then the task preset (the
    (...), dev_metrics.json      backbone's files, preprocessor.json, tokenizer.json)
    bilm_outputs.elmo-tf-*.tmp/  fine-tuning, while it runs: a frozen biLM's outputs
                                 (`FrozenOutputs`; a killed run's, removed when it opens)
"""

import contextlib
import dataclasses
import json
import os

from elmo_tf.data.corpus import BUILTIN_CORPUS, corpus_identity
from elmo_tf.data.generated_corpus import GeneratedLanguage, write_generated_corpus
from elmo_tf.data.vocabulary_counts import build_vocabulary
from elmo_tf.files import (
    exclusive_lock,
    names_a_file,
    read_json,
    remove_path,
    remove_stale_temporaries,
    variables_bytes,
    write_files_atomically,
    write_json_atomically,
)
from elmo_tf.models.family import family_for_backbone
from elmo_tf.models.load_backbone import load_backbone
from elmo_tf.text.vocabulary import Vocabulary
from elmo_tf.training.checkpoints import save_weights_atomically


class RunDirectory:
    """The files of one run in `path` (see the module docstring).

    Example:
    >>> run = RunDirectory("runs/tiny")
    >>> run.record()["settings"]["recipe"]["name"]
    'tiny'
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.run_file = os.path.join(self.path, "run.json")
        self.vocab_file = os.path.join(self.path, "vocab.txt")
        self.language_model_file = os.path.join(self.path, "language_model.weights.h5")
        self.checkpoints = os.path.join(self.path, "checkpoints")
        self.logs = os.path.join(self.path, "logs")

    @contextlib.contextmanager
    def opened(self):
        """Holds the directory for this process while the block runs: makes it, takes its lock
        (`run.lock`; another process's run there is refused with an `InUseError` naming that
        process), and removes what a killed run was writing there (elmo-tf's temporaries no
        live process holds locked; nothing else). If the block fails before the run has a
        record (run.json), a directory made here is removed again: a run refused for its
        inputs leaves nothing behind. A path that is a file is a NotADirectoryError naming it.

        Example:
        >>> with RunDirectory("runs/tiny").opened() as run:
        ...     run.write_record({"settings": settings})
        """
        if names_a_file(self.path):
            raise NotADirectoryError(f"{self.path} is a file: a run's output is a directory "
                                     "(made if absent); give another path.")
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        try:
            os.mkdir(self.path)  # made here or not, decided in one step
            created = True
        except FileExistsError:
            created = False
        lock = os.path.join(self.path, "run.lock")
        try:
            with exclusive_lock(lock, self.path):  # refused: nothing here is touched
                try:
                    for directory in (self.path, self.checkpoints):
                        remove_stale_temporaries(directory)
                    yield self
                except BaseException:
                    if created and not os.path.exists(self.run_file):
                        _remove_all_but(self.path, lock)  # what this run made
                    raise
        except BaseException:
            if created and not os.path.exists(self.run_file):
                with contextlib.suppress(OSError):  # empty, unless another run came in
                    os.rmdir(self.path)
            raise

    def record(self, of=None):
        """run.json's content, or None for a new run; a ValueError naming the file when it is
        not a run's record (an object with the run's `"settings"`), or, with `of` (`"train"`
        or `"finetune"`), when it is another command's run (a pre-training run's settings
        have its `"recipe"`, a fine-tuning run's its `"task"`)."""
        if not os.path.exists(self.run_file):
            return None
        record = read_json(self.run_file)
        if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
            raise ValueError(f"{self.run_file}: not a run's record (an object with the run's "
                             "\"settings\", which elmo-tf writes); put it back, or use "
                             "another directory.")
        kind = "finetune" if "task" in record["settings"] else "train"
        if of is not None and kind != of:
            raise ValueError(f"{self.path} holds a run of `elmo-tf {kind}` (its run.json), not "
                             f"of `elmo-tf {of}`: give another directory"
                             + (" (the biLM to fine-tune is --model)." if of == "finetune"
                                else "."))
        return record

    def write_record(self, record):
        """Writes run.json (a JSON-able dict with the run's `"settings"`), atomically."""
        write_json_atomically(self.run_file, record)

    def recipe(self):
        """The `Recipe` the run trains (from run.json); a ValueError when there is no run."""
        from elmo_tf.recipes.recipe import Recipe

        record = self.record()
        if record is None:
            raise ValueError(f"{self.path} holds no training run (no run.json).")
        return Recipe.from_dict(record["settings"]["recipe"], source=self.run_file)

    def check_settings(self, settings, previous):
        """`previous` (run.json as `record` read it, None for a new run) with `settings`; a
        ValueError naming each difference when the directory holds another run (a recipe's
        name, a label, may differ: a recipe file read by another path is the same recipe). A
        run recorded before corpora were identified by their files (`corpus_identity`; its
        corpus a glob) is compared by the files its glob names now, and its record updated."""
        if previous is None:
            return None
        old = previous["settings"]
        if _is_glob(old.get("corpus")) and old["corpus"] != settings.get("corpus"):
            old = {**old, "corpus": self._recorded_corpus(old["corpus"], settings["corpus"])}
        old, new = _without_labels(old), _without_labels(settings)
        if old == new:
            return {**previous, "settings": settings}
        if {k: v for k, v in old.items() if k != "corpus"} == \
                {k: v for k, v in new.items() if k != "corpus"}:
            raise ValueError(f"the corpus of the run in {self.path} changed since the run "
                             f"started ({_difference(old, new)}): give it the files it trained "
                             "on to resume it, or another --output for a new run.")
        names = [s["recipe"].get("name") if isinstance(s.get("recipe"), dict) else None
                 for s in (previous["settings"], settings)]
        recipes = (f"recipe {names[0]!r} then, {names[1]!r} now; "
                   if all(isinstance(n, str) for n in names) and names[0] != names[1] else "")
        raise ValueError(f"{self.path} holds another run ({recipes}run.json differs: "
                         f"{_difference(old, new)}); give another --output or delete it.")

    def _recorded_corpus(self, recorded, now):
        """The identity of a corpus recorded as globs (elmo-tf 0.2): the run's own built-in
        corpus (recorded by its path inside the run directory, wherever that was), or the files
        the globs name now (relative ones from the working directory)."""
        if now == BUILTIN_CORPUS and isinstance(recorded, str) \
                and recorded.replace(os.sep, "/").endswith("corpus/train/*") \
                and os.path.isfile(os.path.join(self.path, "corpus", "README.txt")):
            return BUILTIN_CORPUS
        if isinstance(recorded, str) and recorded.startswith("tfds:"):
            return recorded
        try:
            return corpus_identity(recorded)
        except Exception:  # noqa: BLE001: not found, unreadable, a file system's own error
            return recorded

    def resolve_corpus(self, corpus, validation, seed):
        """(training corpus, validation corpus, best perplexity or None): the built-in corpus is
        written into the run (its held-out part is the default validation set)."""
        if corpus != BUILTIN_CORPUS:
            return corpus, validation, None
        directory = os.path.join(self.path, "corpus")
        if not os.path.exists(os.path.join(directory, "README.txt")):
            write_generated_corpus(directory, seed=seed)
        heldout = os.path.join(directory, "heldout", "*")
        return (os.path.join(directory, "train", "*"), validation or heldout,
                GeneratedLanguage().best_perplexity())

    def vocabulary_and_size(self, previous, vocabulary, corpus, recipe, read):
        """The run's vocabulary (kept in vocab.txt) and the corpus's size in sentences and
        tokens: from run.json when resuming, else from one counting pass over the corpus (the
        vocabulary built there, or the given `Vocabulary`)."""
        if previous is not None:
            return Vocabulary.load(self.vocab_file), previous["corpus_size"]
        counted = build_vocabulary(corpus, min_count=recipe.min_count,
                                   max_size=recipe.max_vocabulary_size, **read)
        # `<S>`/`</S>` count the sentences (and literal "<S>"/"</S>" tokens, rare enough to
        # ignore).
        counts = counted.counts
        size = {"sentences": counts[counted.bos_id],
                "tokens": sum(counts) - counts[counted.bos_id] - counts[counted.eos_id]}
        vocab = counted if vocabulary is None else vocabulary
        vocab.save(self.vocab_file)
        return vocab, size

    def write_outputs(self, lm, recipe, vocabulary_size, pairs, tokenizer):
        """weights.hdf5 and options.json (the family's model files, with bilm-tf's training
        keys), the same backbone as a KerasHub preset with its tokenizer (`tokenizer`: the
        corpus's), and language_model.weights.h5."""
        write_model_files(lm.backbone, self.path,
                          training=recipe.training_options(vocabulary_size, pairs),
                          tokenizer=tokenizer)
        save_weights_atomically(lm, self.language_model_file)


def write_model_files(backbone, directory, training=None, tokenizer="whitespace"):
    """A model directory, what `Backbone.from_preset` and KerasHub's loaders read: the family's
    files (options.json, with bilm-tf's `training` keys if given; weights.hdf5 in the released
    layout), then the backbone they describe, as it loads for inference (stateless, no
    dropout), as a KerasHub preset (config.json, metadata.json, model.weights.h5), with the
    family's tokenizer (tokenizer.json: `tokenizer`, how the corpus was split into tokens).
    All of them are written in one temporary directory first (`files.write_files_atomically`;
    a killed process's, the next write removes): a new `directory` appears whole in one
    rename; into an existing one (a run's) they are moved one by one, config.json last, so a
    failed write leaves the old model whole and a killed one no preset of two models.

    Example:
    >>> write_model_files(backbone, "model/")
    >>> keras_hub.models.Backbone.from_preset("model/")
    >>> keras_hub.tokenizers.Tokenizer.from_preset("model/")
    """
    def write(staging):
        options, weights = (os.path.join(staging, name) for name in ("options.json",
                                                                    "weights.hdf5"))
        backbone.save_allennlp(weights, options, training=training)
        tokenizer_class = family_for_backbone(backbone).tokenizer_class
        if tokenizer_class is not None:
            tokenizer_class(tokenizer, backbone.max_characters_per_token).save_to_preset(staging)
        load_backbone(options, weights).save_to_preset(staging)

    # The weights twice (weights.hdf5, model.weights.h5), and room for the rest.
    write_files_atomically(directory, write, last="config.json",
                           needed_bytes=2 * variables_bytes(backbone.weights) + 2**20)


def recipe_settings(recipe):
    """The recipe as run.json records it (plain JSON values; the family's own hyper-parameters,
    `Recipe.family_settings`, as keys beside the shared ones), without the fields added to
    recipes after runs recorded them when they hold their defaults (`objective`: ELMo's, the
    only one before there were families; `optimizer`: bilm-tf's Adagrad; `warmup_steps`: 0;
    `steps`, `decay_steps`: None; a family's `settings_class.ADDED_LATER`), so that those
    runs resume."""
    values = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe)
              if f.name != "family_settings"}
    values["model"] = recipe.model.to_options()
    defaults = {f.name: f.default for f in dataclasses.fields(recipe)}
    for name in ("objective", "optimizer", "steps", "warmup_steps", "decay_steps"):
        if values[name] == defaults[name]:
            del values[name]
    settings = recipe.family_settings
    if settings is not None:
        added_later = getattr(settings, "ADDED_LATER", ())
        values.update({f.name: getattr(settings, f.name)
                       for f in dataclasses.fields(settings)
                       if not (f.name in added_later and getattr(settings, f.name) == f.default)})
    return json.loads(json.dumps(values))


def _difference(old, new, prefix=""):
    """The differing leaves of two nested dicts, e.g. `recipe.mode: 'stream' then, ...`."""
    parts = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            parts.append(_difference(a, b, f"{prefix}{key}."))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y) if a != b else None
            if first is not None:
                parts.append(f"{prefix}{key}[{first}]: {a[first]!r} then, {b[first]!r} now")
        elif a != b:
            parts.append(f"{prefix}{key}: {_short(a)} then, {_short(b)} now")
    return ", ".join(p for p in parts if p)


def _short(value):
    """`repr(value)`, a long list as its first entry and its length."""
    if isinstance(value, list) and len(value) > 2:
        return f"[{value[0]!r}, ... ({len(value)} entries)]"
    return repr(value)


def _without_labels(settings):
    """`settings` without what only labels a run (the recipe's name: a recipe file's includes
    the path it was read by) or sets its default length (the recipe's `steps`, which a run
    recorded before it had, and `--steps` on resuming, may change)."""
    if not isinstance(settings.get("recipe"), dict):
        return settings
    return {**settings, "recipe": {k: v for k, v in settings["recipe"].items()
                                   if k not in ("name", "steps")}}


def _is_glob(corpus):
    """Whether a recorded corpus is a glob or a list of globs (elmo-tf 0.2's record), not the
    files' identity."""
    return isinstance(corpus, str) or (isinstance(corpus, list) and bool(corpus)
                                       and all(isinstance(c, str) for c in corpus))


def _remove_all_but(directory, kept):
    """Removes everything in `directory` but the path `kept` (its lock, which goes when it is
    released)."""
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        if path != kept:
            with contextlib.suppress(OSError):
                remove_path(path)
