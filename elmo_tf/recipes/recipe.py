"""`Recipe`: everything that defines a pre-training run, by name or from a JSON file."""

import dataclasses
import math

from elmo_tf.checks import positive_int_problems
from elmo_tf.data.language_model_dataset import MODES
from elmo_tf.files import read_json
from elmo_tf.models.family import (
    architecture,
    families,
    family_for_objective,
    family_for_options,
)
from elmo_tf.optimizers.warmup_linear_decay import schedule_problems

OPTIMIZERS = ("adagrad", "adam")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A pre-training recipe: the model's shape, the objective and the training hyper-parameters.

    The named recipes (`Recipe.names()`) are the families' (`Family.recipes`): ELMo's
    `elmo_original` (the paper's run), `elmo_small`, `elmo_medium`, `tiny` (tests and the demo)
    and `elmo_cpu` (real English on a 2-core CPU in half an hour: Adam, sentence batches, 3,700
    steps whatever the corpus; `bench/elmo_cpu_in_30_minutes.py`), and Masked ELMo's
    `masked_elmo_original`, `masked_elmo_small`, `masked_elmo_cpu` and `tiny_masked`, each its
    ELMo counterpart's training with the masked-LM objective (`docs/masked_elmo.md`). Each
    trains the preset architecture of its name (`elmo_tf.models.family.architecture`).

    Args:
        name: a label for logs.
        model: the architecture to train: a config of the objective's family (`ElmoConfig`,
            `MaskedElmoConfig`, ...).
        mode: `"stream"` (bilm-tf's; for the masked LM, streams read both ways) or
            `"sentence"` batches (see `elmo_tf.data`).
        batch_size: global batch: rows over all replicas.
        window: tokens per row in stream mode.
        num_negatives: sampled-softmax candidates per batch.
        dropout: on every LSTM input and the top layer, in training.
        optimizer: `"adagrad"` (bilm-tf's: `elmo_tf.optimizers.SparseAdagrad`) or `"adam"`
            (`elmo_tf.optimizers.Adam`; learns faster on a small budget).
        learning_rate: the optimizer's (its peak, with a warm-up or a decay).
        warmup_steps, decay_steps: the learning rate's schedule
            (`elmo_tf.optimizers.WarmupLinearDecay`): a linear warm-up over the first
            `warmup_steps` (0: none), then a linear decay to zero at step `decay_steps`
            (None, the recipes': constant; a run may not be longer). Tried on both CPU
            recipes in `bench/pretraining_value.py --only grid`.
        initial_accumulator_value: Adagrad's.
        clip_norm: global-norm gradient clip (of the gradient summed over replicas).
        epochs: passes over the corpus (an epoch is corpus tokens / (batch_size x window) steps
            in stream mode, sentences / batch_size in sentence mode, as bilm-tf counts).
        steps: the run's length when `train` is given none (no epochs, steps or minutes):
            this many steps whatever the corpus, read as often as it takes; None (the
            default): `epochs` passes. The CPU recipes train for the compute their docs state
            (`elmo_cpu`: 3,700 steps, the documented 30-minute run). A recipe file that gives
            `epochs` over a base with `steps` trains those epochs.
        min_count, max_vocabulary_size: for the vocabulary built from the corpus.
        shuffle_buffer: sentences in the shuffle buffer.
        objective: the family that trains (`Family.objective` in the family registry):
            `"bilm"` (ELMo's two next-token losses) or `"masked_lm"` (Masked ELMo: BERT's
            masked-LM loss, a fully bidirectional model).
        family_settings: the hyper-parameters only the objective's family has, an instance of
            its `Family.settings_class` (Masked ELMo's: `MaskedElmoSettings`, e.g.
            `selection_rate`); None: the family's defaults. In a recipe file and in run.json
            they are keys beside the shared ones, which other families' recipes refuse.

    Example:
    >>> recipe = Recipe.from_name("tiny")
    >>> recipe.model.lstm_dim, recipe.mode
    (64, 'stream')
    >>> Recipe.from_file("my_recipe.json")   # {"base": "elmo_small", "batch_size": 64}
    """

    name: str
    model: object
    mode: str = "stream"
    batch_size: int = 128
    window: int = 20
    num_negatives: int = 8192
    dropout: float = 0.1
    optimizer: str = "adagrad"
    learning_rate: float = 0.2
    warmup_steps: int = 0
    decay_steps: int | None = None
    initial_accumulator_value: float = 1.0
    clip_norm: float = 10.0
    epochs: int = 10
    steps: int | None = None
    min_count: int = 1
    max_vocabulary_size: int | None = None
    shuffle_buffer: int = 10_000
    objective: str = "bilm"
    family_settings: object = None

    def __post_init__(self):
        problems = []
        if self.mode not in MODES:
            problems.append(f"mode must be one of {list(MODES)}; got {self.mode!r}")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"optimizer must be one of {list(OPTIMIZERS)}; got "
                            f"{self.optimizer!r}")
        problems += positive_int_problems(**{
            name: getattr(self, name) for name in ("batch_size", "window", "num_negatives",
                                                   "epochs", "min_count", "shuffle_buffer")})
        if self.steps is not None:
            problems += positive_int_problems(steps=self.steps)
        problems += schedule_problems(self.warmup_steps, self.decay_steps)
        if self.max_vocabulary_size is not None and (
                not isinstance(self.max_vocabulary_size, int) or self.max_vocabulary_size < 4):
            problems.append(f"max_vocabulary_size must be None or an integer >= 4 (the three "
                            f"specials and a word); got {self.max_vocabulary_size!r}")
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            problems.append(f"dropout must be in [0, 1); got {self.dropout!r}")
        for name in ("learning_rate", "clip_norm"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                problems.append(f"{name} must be a positive number; got {value!r}")
        if not (isinstance(self.initial_accumulator_value, (int, float))
                and self.initial_accumulator_value >= 0):
            problems.append(f"initial_accumulator_value must be >= 0; got "
                            f"{self.initial_accumulator_value!r}")
        problems += self._family_problems(not problems)
        if problems:
            raise ValueError(f"recipe {self.name!r}: " + "; ".join(problems) + ".")

    def _family_problems(self, shared_fields_valid):
        """The objective, the model and `family_settings` against the family registry (the
        settings' defaults filled in), then the family's own checks."""
        try:
            family = family_for_objective(self.objective)
        except ValueError as error:
            return [str(error).rstrip(".")]
        problems = []
        if type(self.model) is not family.config_class:
            problems.append(f"the {self.objective!r} objective trains the {family.name} family, "
                            f"whose model is a {family.config_class.__name__}; got a "
                            f"{type(self.model).__name__} (a preset of its family, or its "
                            "options)")
        if self.family_settings is None and family.settings_class is not None:
            object.__setattr__(self, "family_settings", family.settings_class())
        if type(self.family_settings) is not (family.settings_class or type(None)):
            expected = getattr(family.settings_class, "__name__", "None")
            problems.append(f"family_settings of the {self.objective!r} objective are a "
                            f"{expected}; got a {type(self.family_settings).__name__}")
        if not problems and shared_fields_valid:
            problems += family.recipe_problems(self)
        return problems

    @property
    def family(self):
        """The model family the recipe trains (`elmo_tf.models.family`)."""
        return family_for_objective(self.objective)

    @classmethod
    def names(cls):
        """The named recipes: the registered families' (`Family.recipes`), family by family."""
        return tuple(name for family in families() for name in family.recipes)

    @classmethod
    def from_name(cls, name):
        """The named recipe `name` (see `names()`)."""
        for family in families():
            if name in family.recipes:
                return cls.from_dict({"name": name, "objective": family.objective,
                                      **family.recipes[name]},
                                     source=f"the {family.name} family's recipe {name!r}")
        raise ValueError(f"unknown recipe {name!r}; available: {list(cls.names())}, or a path "
                         "to a recipe JSON file.")

    @classmethod
    def from_file(cls, path):
        """Reads a recipe JSON file: `{"base": NAME, ...overrides}` or every field.

        `"model"` is a preset architecture's name (`elmo_tf.models.family.preset_names()`, e.g.
        `elmo_small`) or an options.json object (`{"lstm": {...}, "char_cnn": {...}}`, read by
        the family it describes). The objective's family's own hyper-parameters
        (`Family.settings_class`, e.g. Masked ELMo's `selection_rate`) are keys beside the
        shared fields. Unknown keys are errors.
        """
        return cls.from_dict(read_json(path), source=str(path))

    @classmethod
    def from_dict(cls, spec, source="recipe"):
        """Builds a recipe from a dict (see `from_file`)."""
        if not isinstance(spec, dict):
            raise ValueError(f"{source}: a recipe is a JSON object; got {type(spec).__name__}.")
        spec = dict(spec)
        base = spec.pop("base", None)
        based_on = cls.from_name(base) if base is not None else None
        objective = spec.get("objective", based_on.objective if based_on else "bilm")
        family = next((f for f in families() if f.objective == objective), None)
        settings = {key: spec.pop(key) for key in _settings_fields(family) if key in spec}
        fields = [f.name for f in dataclasses.fields(cls) if f.name != "family_settings"]
        for other in families():
            for key in sorted(set(spec) & set(_settings_fields(other)) - set(fields)):
                raise ValueError(f"{source}: {key} is the {other.objective!r} objective's; "
                                 f"leave it out of a {objective!r} recipe.")
        unknown = sorted(set(spec) - set(fields))
        if unknown:
            raise ValueError(f"{source}: unknown recipe keys {unknown}; accepted: "
                             f"{['base'] + fields + list(_settings_fields(family))}.")
        if isinstance(spec.get("model"), str):
            spec["model"] = architecture(spec["model"])
        elif isinstance(spec.get("model"), dict):
            where = f"{source}: model"
            spec["model"] = family_for_options(spec["model"], where).config_class.from_options(
                spec["model"], source=where)
        if based_on is not None and based_on.objective == objective:
            spec["family_settings"] = (dataclasses.replace(based_on.family_settings, **settings)
                                       if settings else based_on.family_settings)
        else:  # the family's defaults, where none are given
            spec["family_settings"] = family.settings_class(**settings) if settings else None
        if based_on is not None:
            spec.setdefault("name", f"{base} ({source})")
            if "epochs" in spec:  # the length asked: not the base's steps
                spec.setdefault("steps", None)
            return dataclasses.replace(based_on, **spec)
        if "model" not in spec:
            raise ValueError(f"{source}: missing 'model' (or give \"base\": a recipe name from "
                             f"{list(cls.names())}).")
        spec.setdefault("name", source)
        return cls(**spec)

    @classmethod
    def resolve(cls, name_or_path):
        """A recipe name, or a path to a recipe JSON file."""
        if name_or_path in cls.names():
            return cls.from_name(name_or_path)
        if name_or_path.endswith(".json"):
            return cls.from_file(name_or_path)
        return cls.from_name(name_or_path)  # the error names the recipes

    def training_options(self, vocabulary_size, n_train_tokens):
        """The training keys of options.json for this recipe: bilm-tf's, and the family's own
        (`Family.training_options`)."""
        return {"batch_size": self.batch_size, "bidirectional": True, "dropout": self.dropout,
                "n_epochs": self.epochs, "n_negative_samples_batch": self.num_negatives,
                "n_tokens_vocab": vocabulary_size, "n_train_tokens": n_train_tokens,
                "unroll_steps": self.window, "all_clip_norm_val": self.clip_norm,
                "sample_softmax": vocabulary_size > self.num_negatives,
                **self.family.training_options(self)}


def _settings_fields(family):
    """The names of `family`'s own hyper-parameters (`Family.settings_class`; none for None)."""
    settings_class = getattr(family, "settings_class", None)
    return tuple(f.name for f in dataclasses.fields(settings_class)) if settings_class else ()
