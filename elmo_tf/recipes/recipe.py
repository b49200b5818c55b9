"""`Recipe`: everything that defines a pre-training run, by name or from a JSON file."""

import dataclasses
import math

from elmo_tf.checks import non_negative_number_problems, positive_int_problems
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

    The named recipes (`Recipe.names()`): `elmo_original` is the paper's run
    (`docs/conventions.md` §7: 2x4096/512 LSTMs, the 2048-filter char CNN, 2 highways,
    clips 3, stream batches of 20-token windows, 8192 sampled negatives, dropout 0.1, Adagrad 0.2
    with initial accumulator 1.0, global-norm clip 10, 10 epochs; bilm-tf ran 128 rows on each of 3
    GPUs, so the global batch is 384). `elmo_small` and `elmo_medium` train the released
    small/medium shapes the same way. `tiny` is a model of a few hundred thousand parameters for
    tests and the demo. `elmo_cpu` learns real English on a 2-core CPU in half an hour
    (Adam, sentence batches, 3,700 steps whatever the corpus; `bench/elmo_cpu_in_30_minutes.py`). `masked_elmo_small`, `masked_elmo_original`,
    `masked_elmo_cpu` and `tiny_masked` train Masked ELMo (`docs/masked_elmo.md`) with the
    masked-LM objective and the same optimizer as their ELMo counterparts: `masked_elmo_small`
    and `masked_elmo_original` in stream batches read both ways (bidirectional truncated
    backpropagation through time; with `masked_elmo_cpu`'s model on real text, stream batches
    beat sentence batches), `tiny_masked` in sentence batches (better on the built-in corpus of
    independent sentences) and `masked_elmo_cpu` too, as `elmo_cpu` (its downstream figures
    were measured so), with the first layer's cloze loss (`cloze_weight` 1: measured better
    at equal compute). See `docs/masked_elmo.md`.
    Each trains the preset architecture of its name (`elmo_tf.models.family.architecture`).

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
        masks_per_sentence: masked LM: disjoint maskings of each sentence per batch (mask
            accumulation, `elmo_tf.data.masked_language_model_dataset`).
        selection_rate: masked LM: the fraction of tokens each masking selects for prediction
            (BERT's 15 %; the Masked ELMo recipes select 40 %, measured in
            `docs/masked_elmo.md`; of those, 80 % become the mask token, 10 % a random word).
        next_token_weight: masked LM, sentence batches: the weight of ELMo's next-token loss on
            the first layer, added to the masked LM's (0: BERT's loss alone;
            `MaskedElmoLanguageModel`, `docs/masked_elmo.md`).
        cloze_weight: masked LM, sentence batches: the weight of a cloze loss on the first
            layer (every token predicted from the forward half before it and the backward half
            after it), added to the masked LM's (0: none; `MaskedElmoLanguageModel`).
        replaced_token_weight: masked LM, sentence batches: the weight of ELECTRA's
            replaced-token detection (0: none; ELECTRA's is 50): the masked LM becomes a
            small generator and the backbone a discriminator (`MaskedElmoLanguageModel`;
            beyond the paper, `docs/masked_elmo.md`).
        (`masks_per_sentence`, `selection_rate`, `next_token_weight`, `cloze_weight` and
        `replaced_token_weight` are the masked LM's,
        `Family.recipe_fields`: other objectives leave them at their defaults.)

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
    masks_per_sentence: int = 1
    selection_rate: float = 0.15
    next_token_weight: float = 0.0
    cloze_weight: float = 0.0
    replaced_token_weight: float = 0.0

    def __post_init__(self):
        problems = self._family_problems()
        if self.mode not in MODES:
            problems.append(f"mode must be one of {list(MODES)}; got {self.mode!r}")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"optimizer must be one of {list(OPTIMIZERS)}; got "
                            f"{self.optimizer!r}")
        if not (isinstance(self.selection_rate, (int, float)) and 0 < self.selection_rate <= 1):
            problems.append(f"selection_rate must be in (0, 1]; got {self.selection_rate!r}")
        problems += non_negative_number_problems(
            next_token_weight=self.next_token_weight, cloze_weight=self.cloze_weight,
            replaced_token_weight=self.replaced_token_weight)
        problems += positive_int_problems(**{
            name: getattr(self, name) for name in ("batch_size", "window", "num_negatives",
                                                   "epochs", "min_count", "shuffle_buffer",
                                                   "masks_per_sentence")})
        if isinstance(self.masks_per_sentence, int) and isinstance(self.batch_size, int) \
                and self.masks_per_sentence > 0 and self.batch_size % self.masks_per_sentence:
            problems.append(f"batch_size ({self.batch_size}) must be a multiple of "
                            f"masks_per_sentence ({self.masks_per_sentence})")
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
        if problems:
            raise ValueError(f"recipe {self.name!r}: " + "; ".join(problems) + ".")

    def _family_problems(self):
        """The objective and the model against the family registry, and the fields other
        families own left at their defaults."""
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
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for other in families():
            for field in other.recipe_fields if other is not family else ():
                if getattr(self, field) != defaults[field]:
                    problems.append(f"{field} is the {other.objective!r} objective's; leave it "
                                    f"out of a {self.objective!r} recipe")
        if not problems:
            problems += family.recipe_problems(self)
        return problems

    @property
    def family(self):
        """The model family the recipe trains (`elmo_tf.models.family`)."""
        return family_for_objective(self.objective)

    @classmethod
    def names(cls):
        """The named recipes: the package's, then those of registered families from outside
        it (`Family.recipes`)."""
        return tuple(_RECIPES) + tuple(name for family in families()
                                       for name in family.recipes if name not in _RECIPES)

    @classmethod
    def from_name(cls, name):
        """The named recipe `name` (see `names()`)."""
        for family in families():
            if name in family.recipes and name in _RECIPES:
                raise ValueError(f"recipe {name!r} is both elmo-tf's and the {family.name} "
                                 "family's: rename the family's (Family.recipes).")
            if name in family.recipes:
                return cls.from_dict({"name": name, "objective": family.objective,
                                      **family.recipes[name]},
                                     source=f"the {family.name} family's recipe {name!r}")
        if name in _RECIPES:
            return _RECIPES[name]
        raise ValueError(f"unknown recipe {name!r}; available: {list(cls.names())}, or a path "
                         "to a recipe JSON file.")

    @classmethod
    def from_file(cls, path):
        """Reads a recipe JSON file: `{"base": NAME, ...overrides}` or every field.

        `"model"` is a preset architecture's name (`elmo_tf.models.family.preset_names()`, e.g.
        `elmo_small`) or an options.json object (`{"lstm": {...}, "char_cnn": {...}}`, read by
        the family it describes). Unknown keys are errors.
        """
        return cls.from_dict(read_json(path), source=str(path))

    @classmethod
    def from_dict(cls, spec, source="recipe"):
        """Builds a recipe from a dict (see `from_file`)."""
        if not isinstance(spec, dict):
            raise ValueError(f"{source}: a recipe is a JSON object; got {type(spec).__name__}.")
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(spec) - set(fields) - {"base"})
        if unknown:
            raise ValueError(f"{source}: unknown recipe keys {unknown}; accepted: "
                             f"{['base'] + fields}.")
        spec = dict(spec)
        base = spec.pop("base", None)
        if isinstance(spec.get("model"), str):
            spec["model"] = architecture(spec["model"])
        elif isinstance(spec.get("model"), dict):
            where = f"{source}: model"
            spec["model"] = family_for_options(spec["model"], where).config_class.from_options(
                spec["model"], source=where)
        if base is not None:
            spec.setdefault("name", f"{base} ({source})")
            if "epochs" in spec:  # the length asked: not the base's steps
                spec.setdefault("steps", None)
            return dataclasses.replace(cls.from_name(base), **spec)
        if "model" not in spec:
            raise ValueError(f"{source}: missing 'model' (or give \"base\": a recipe name from "
                             f"{list(cls.names())}).")
        spec.setdefault("name", source)
        return cls(**spec)

    @classmethod
    def resolve(cls, name_or_path):
        """A recipe name, or a path to a recipe JSON file."""
        if name_or_path in _RECIPES:
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


def _masked(name, base, **kwargs):
    # 40 % of the tokens selected, not BERT's 15 %: at equal compute on real text it probed
    # better on all three tasks of bench/pretraining_value.py (docs/masked_elmo.md).
    return dataclasses.replace(_RECIPES[base], name=name, model=architecture(name),
                               objective="masked_lm", selection_rate=0.4, **kwargs)


_RECIPES = {
    "elmo_original": Recipe("elmo_original", architecture("elmo_original"),
                            batch_size=384),
    "elmo_medium": Recipe("elmo_medium", architecture("elmo_medium"), batch_size=384),
    "elmo_small": Recipe("elmo_small", architecture("elmo_small"), batch_size=384),
    "tiny": Recipe("tiny", architecture("tiny"), batch_size=32, epochs=3),
    # Half an hour on 2 CPU cores for ~1.4 M tokens of real text (bench/downstream.py): Adam,
    # sentence batches (scored as an n-gram model is: each sentence from an empty context), a
    # shuffle buffer that holds the whole corpus (a corpus of documents in order, shuffled
    # 10,000 sentences at a time, swings the model from one source to the next every pass).
    "elmo_cpu": Recipe("elmo_cpu", architecture("elmo_cpu"), mode="sentence",
                       batch_size=64, num_negatives=2048, optimizer="adam",
                       learning_rate=2e-3, epochs=2, steps=3700, min_count=2,
                       shuffle_buffer=100_000),
}
# Their batches: `bench/masked_elmo.py`'s parts `tbptt_documents` (real text) and `tbptt` (the
# built-in corpus); docs/masked_elmo.md.
_RECIPES.update({
    "masked_elmo_original": _masked("masked_elmo_original", "elmo_original"),  # stream
    "masked_elmo_small": _masked("masked_elmo_small", "elmo_small"),           # stream
    # elmo_cpu's minutes: 3,700 of its steps take what 3,360 of these do (0.388 against
    # 0.427 s a step, bench/results/pretraining_value-cpu-issue38.json's calibrations).
    # With the first layer's cloze loss (beyond the paper): two seeds at 15 and 30 CPU-minutes
    # on the test splits, WSJ POS +3.2 over the masked LM alone at 15 and within 1.1 of ELMo
    # at 30, a far better masked LM (docs/masked_elmo.md); its steps cost 0.3 % more.
    "masked_elmo_cpu": _masked("masked_elmo_cpu", "elmo_cpu", steps=3360,      # sentence
                               cloze_weight=1.0),
    "tiny_masked": _masked("tiny_masked", "tiny", mode="sentence"),
})
