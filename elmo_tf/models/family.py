"""`Family`: a model family as pre-training, the command line, file loading and the recipes know
it; and the one registry of families and their preset architectures."""

import keras


class Family:
    """What elmo-tf's hallways (`elmo_tf.training`, `elmo_tf.cli`, `load_backbone`, the recipes,
    `Backbone.from_preset`) know of a model family: nothing else. A family is a folder (its
    config, presets, backbone, weight files, pre-training task) and one `register_family` call
    in its `__init__.py`, as a KerasHub family is a folder and one `register_presets` line.

    Subclass it, set the attributes, implement the methods, and register an instance.

    Attributes:
        name: the family's name (`"elmo"`).
        objective: the recipe objective that pre-trains it (`Recipe.objective`, `"bilm"`).
        config_class: its architecture's config: `PRESETS`/`ALIASES` (the preset
            architectures, in the one registry), `from_architecture(name)`,
            `from_options(dict, source)`, `to_options()`, `to_dict()`/`from_dict()`.
        backbone_class: its `Backbone`, with `config_class`,
            `from_allennlp(options_file, weight_file, **kwargs)` and
            `save_allennlp(weight_file, options_file, training=None)` (the model files `train`
            and `init` write and `dump`, `export` and `finetune` read), registered with
            `keras.saving.register_keras_serializable` (the KerasHub preset they write
            beside those files names it).
        tokenizer_class: its `CharIdsTokenizer` subclass (`backbone_cls` its backbone), which
            model directories carry as KerasHub's tokenizer (None: none).
        settings_class: the hyper-parameters only this family has: a frozen dataclass with
            a default for every field (None: none). Its fields are keys of the family's
            recipe files and run.json records beside the shared ones; a recipe holds them as
            `Recipe.family_settings`, and `recipe_problems` checks them. Fields named in its
            `ADDED_LATER` (a tuple, optional) are left out of run.json at their defaults, as
            the runs recorded before them were, so that those runs resume.
        recipes: the family's named recipes: name -> a recipe file's object
            (`{"model": preset, "mode": "sentence", ...}`, or `{"base": another name, ...}`;
            the family's objective is added), which `Recipe.from_name` and
            `train --recipe NAME` know.
        next_token_bound: whether the built-in corpus's best perplexity (a next-token bound)
            applies to its perplexity.
        reads_unmarked_options: whether options.json files no family claims
            (`describes`) are this family's: ELMo's, whose released files carry no mark.

    Example:
    >>> class ToyFamily(Family):
    ...     name, objective = "toy", "toy_lm"
    ...     config_class, backbone_class = ToyConfig, ToyBackbone
    ...     ...
    >>> register_family(ToyFamily())
    """

    name = None
    objective = None
    config_class = None
    backbone_class = None
    tokenizer_class = None
    settings_class = None
    recipes = {}
    next_token_bound = False
    reads_unmarked_options = False

    def describes(self, options):
        """Whether an options.json (a dict) carries this family's mark."""
        return False

    def training_options(self, recipe):
        """The family's own training keys of options.json for `recipe` (a dict; none here)."""
        return {}

    def recipe_problems(self, recipe):
        """What makes `recipe` wrong for this family (a list of strings; the `Recipe` checks its
        shared fields, the family its `family_settings` and how they combine with them)."""
        return []

    def copies_per_sentence(self, recipe):
        """How many times a training batch reads each sentence (the masked LM's mask
        accumulation; 1 here): an epoch's steps and a step's tokens count each copy, and each
        replica's rows are a multiple of it."""
        return 1

    def supervised_predictions(self, recipe, size):
        """How many predictions the objective is trained on in one pass over a corpus of
        `size` (`{"tokens": ..., "sentences": ...}`, its words and sentences), every copy of a
        sentence counted (`copies_per_sentence`); None where the family does not say. A run
        records it per step in run.json (`supervised_predictions_per_step`), so that runs of
        different objectives compare by what they were taught, not only by steps."""
        return None

    def build_language_model(self, recipe, vocabulary_size, replicas=1, dtype=None):
        """The recipe's pre-training task (a `LanguageModel`: `train` and `evaluate` give it
        the vocabulary through `set_vocabulary`), built (its weights exist), not compiled: its
        backbone with `recipe.dropout`, in stream mode keeping state for
        `recipe.batch_size // replicas` rows, under the dtype policy `dtype`."""
        raise NotImplementedError

    def training_batches(self, sentences, vocabulary, recipe, *, per_replica, replicas, seed,
                         pad_to_buckets):
        """The endless, reproducible training batches of one worker (`sentences`: its share of
        `read_corpus`), for `replicas` local replicas of `per_replica` rows each: a dataset of
        which every `replicas` consecutive elements make one step (`pad_to_buckets`: few
        shapes, for XLA)."""
        raise NotImplementedError

    def evaluation_batches(self, sentences, vocabulary, recipe, *, pad_to_buckets):
        """One ordered pass over held-out `sentences` in batches of `recipe.batch_size`, the
        same for every run of the family (so that their figures compare)."""
        raise NotImplementedError

    def evaluation_results(self, results):
        """`evaluate`'s metrics (a dict), with any figure the family derives from them."""
        return results

    def describe(self, results):
        """One line of the perplexities in `results`, after the name of the corpus."""
        return f"perplexity: {results['perplexity']:.2f}"


_FAMILIES = {}


def register_family(family):
    """Adds `family` (a `Family` instance) to the registry; its name, objective and preset names
    must be new."""
    for cls in (family.backbone_class, family.tokenizer_class):
        if cls is not None and keras.saving.get_registered_object(
                keras.saving.get_registered_name(cls)) is not cls:
            raise ValueError(f"cannot register family {family.name!r}: {cls.__name__} is not "
                             "registered with Keras (decorate it with "
                             "@keras.saving.register_keras_serializable(package=...)): the "
                             "KerasHub presets of its model directories name it.")
    clashes = [f"name {family.name!r}" for f in _FAMILIES.values() if f.name == family.name]
    clashes += [f"objective {family.objective!r} (family {f.name!r})"
                for f in _FAMILIES.values() if f.objective == family.objective]
    taken = {name for f in _FAMILIES.values() for name in _preset_names(f)}
    clashes += [f"preset {name!r}" for name in _preset_names(family) if name in taken]
    taken = {name for f in _FAMILIES.values() for name in f.recipes}
    clashes += [f"recipe {name!r}" for name in family.recipes if name in taken]
    if clashes:
        raise ValueError(f"cannot register family {family.name!r}: already registered: "
                         f"{', '.join(clashes)}.")
    _FAMILIES[family.name] = family


def families():
    """The registered families, in registration order."""
    return tuple(_FAMILIES.values())


def family_for_backbone(backbone):
    """The family whose `backbone_class` is `backbone`'s class."""
    for family in _FAMILIES.values():
        if type(backbone) is family.backbone_class:
            return family
    raise ValueError(f"no registered model family builds a {type(backbone).__name__} "
                     f"(registered: {list(_FAMILIES)}).")


def family_for_objective(objective):
    """The family a recipe objective pre-trains."""
    for family in _FAMILIES.values():
        if family.objective == objective:
            return family
    raise ValueError(f"unknown objective {objective!r}; the registered families train "
                     f"{[f.objective for f in _FAMILIES.values()]}.")


def family_for_options(options, source="options"):
    """The family whose mark an options.json dict carries (`Family.describes`), or the one that
    reads unmarked options (ELMo's released files)."""
    if not isinstance(options, dict):
        raise ValueError(f"{source}: expected a JSON object with the sections 'lstm' and "
                         f"'char_cnn' (an options.json); got a JSON {_json_type(options)}.")
    found = [f for f in _FAMILIES.values() if f.describes(options)] or [
        f for f in _FAMILIES.values() if f.reads_unmarked_options]
    if len(found) != 1:
        raise ValueError(f"{source}: " + (
            "no registered model family reads these options" if not found else
            f"families {[f.name for f in found]} all claim these options") +
            f" (registered: {list(_FAMILIES)}).")
    return found[0]


def family_for_preset(name):
    """The family of the preset architecture `name` (or one of its aliases)."""
    for family in _FAMILIES.values():
        if name in _preset_names(family):
            return family
    raise ValueError(f"unknown preset {name!r}; available: {list(preset_names())}.")


def preset_names():
    """Every registered preset architecture, family by family (aliases left out)."""
    return tuple(name for f in _FAMILIES.values() for name in f.config_class.PRESETS)


def architecture(name):
    """The config of the preset architecture `name`, whatever its family."""
    return family_for_preset(name).config_class.from_architecture(name)


def _preset_names(family):
    return set(family.config_class.PRESETS) | set(family.config_class.ALIASES)


def _json_type(value):
    """The JSON name of a parsed value's type (`list` -> "array")."""
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)
