"""A run's directory, pre-training or fine-tuning: its settings (a resumed run must match
them), its record, its checkpoints, and what a killed run was writing, cleared when a run opens
it. One implementation for both kinds of run; the pre-training files too:

    run.json                     the settings (and the run's progress), JSON
    checkpoints/                 `CheckpointFiles`: pre-training's ckpt-STEP.weights.h5 (model +
                                 optimizer every checkpoint interval, the last 2), fine-tuning's
                                 epoch-NNN.weights.h5 (the last epoch)
    options.json                 pre-training: the family's options (architecture + training keys)
    weights.hdf5                 pre-training: the biLM in its family's files (written at the end)
    vocab.txt                    pre-training: the softmax vocabulary, bilm-tf's format
    language_model.weights.h5    pre-training: the whole pre-training task (softmax included)
    corpus/                      pre-training: the built-in corpus, when the run trains on it
    logs/                        pre-training: TensorBoard
    best.weights.h5, model.keras, dev_metrics.json   fine-tuning (`elmo_tf.training.finetuning`)
"""

import dataclasses
import json
import os

from elmo_tf.data.corpus import BUILTIN_CORPUS
from elmo_tf.data.generated_corpus import GeneratedLanguage, write_generated_corpus
from elmo_tf.data.vocabulary_counts import build_vocabulary
from elmo_tf.files import read_json, remove_stale_temporaries, write_json_atomically
from elmo_tf.models.family import families
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

    def open(self):
        """Makes the directory, and removes what a killed run was writing there (temporaries
        no live process holds locked)."""
        os.makedirs(self.path, exist_ok=True)
        for directory in (self.path, self.checkpoints):
            remove_stale_temporaries(directory)

    def record(self):
        """run.json's content, or None for a new run."""
        return read_json(self.run_file) if os.path.exists(self.run_file) else None

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

    def check_settings(self, settings):
        """run.json as it was (None for a new run); a ValueError naming each difference when
        the directory holds another run."""
        previous = self.record()
        if previous is not None and previous["settings"] != settings:
            raise ValueError(f"{self.path} holds another run (run.json differs: "
                             f"{_difference(previous['settings'], settings)}); give another "
                             "--output or delete it.")
        return previous

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

    def write_outputs(self, lm, recipe, vocabulary_size, pairs):
        """weights.hdf5 and options.json (the family's model files, with bilm-tf's training
        keys) and language_model.weights.h5."""
        lm.backbone.save_allennlp(os.path.join(self.path, "weights.hdf5"),
                                  os.path.join(self.path, "options.json"),
                                  training=recipe.training_options(vocabulary_size, pairs))
        save_weights_atomically(lm, self.language_model_file)


def recipe_settings(recipe):
    """The recipe as run.json records it (plain JSON values): without the fields other
    families own (`Family.recipe_fields`), and without the fields added to recipes after runs
    recorded them when they hold their defaults (`objective`: ELMo's, the only one before
    there were families; `optimizer`: bilm-tf's Adagrad; `next_token_weight`: 0), so that
    those runs resume."""
    values = {f: getattr(recipe, f) for f in recipe.__dataclass_fields__}
    values["model"] = recipe.model.to_options()
    for family in families():
        if family is not recipe.family:
            for name in family.recipe_fields:
                values.pop(name, None)
    defaults = {f.name: f.default for f in dataclasses.fields(recipe)}
    for name in ("objective", "optimizer", "next_token_weight"):  # as before they existed
        if name in values and values[name] == defaults[name]:
            del values[name]
    return json.loads(json.dumps(values))


def _difference(old, new, prefix=""):
    """The differing leaves of two nested dicts, e.g. `recipe.mode: 'stream' then, ...`."""
    parts = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            parts.append(_difference(a, b, f"{prefix}{key}."))
        elif a != b:
            parts.append(f"{prefix}{key}: {a!r} then, {b!r} now")
    return ", ".join(p for p in parts if p)
