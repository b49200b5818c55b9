"""`ElmoConfig`: the shape of an ELMo biLM, read from and written to bilm-tf's options.json."""

import dataclasses
import json
import numbers

from elmo_tf.checks import positive_int_problems
from elmo_tf.files import read_json, write_json_atomically
from elmo_tf.models.elmo.elmo_presets import ALIASES, ELMO_PRESETS


# Keys of options.json that only bilm-tf's training reads; kept as they are, not interpreted.
TRAINING_KEYS = (
    "all_clip_norm_val", "batch_size", "bidirectional", "dropout", "n_epochs",
    "n_negative_samples_batch", "n_tokens_vocab", "n_train_tokens", "sample_softmax",
    "share_embedding_softmax", "unroll_steps",
)
_LSTM_KEYS = {"dim": True, "projection_dim": True, "n_layers": True, "cell_clip": False,
              "proj_clip": False, "use_skip_connections": False}
_CHAR_CNN_KEYS = {"embedding": True, "filters": True, "activation": True,
                  "max_characters_per_token": True, "n_characters": True, "n_highway": False}


@dataclasses.dataclass(frozen=True)
class ElmoConfig:
    """The architecture of an ELMo biLM (bilm-tf's options.json, `docs/conventions.md` §2).

    Fields left out of an options.json take bilm-tf's meaning of a missing key: no clipping, no
    skip connections, no highway layers.

    Args:
        lstm_dim: LSTM memory cell size (`lstm.dim`).
        projection_dim: LSTM projection and token embedding size (`lstm.projection_dim`).
        n_layers: LSTM layers per direction (`lstm.n_layers`).
        char_embedding_dim: char embedding size (`char_cnn.embedding.dim`).
        filters: `(width, n_filters)` pairs (`char_cnn.filters`).
        cell_clip, proj_clip: clip values or None (`lstm.cell_clip`, `lstm.proj_clip`).
        use_skip_connections: residual connections from the second LSTM layer on.
        n_highway: highway layers after the char CNN (`char_cnn.n_highway`).
        activation: `"relu"` or `"tanh"` after the char convolutions.
        max_characters_per_token: char ids per token (50).
        n_characters: 262 (inference files) or 261 (training files); the model always has the
            261 learned char rows plus a zero padding row.
        training: bilm-tf training keys of the options.json (`TRAINING_KEYS`), kept verbatim.

    Masked ELMo's architecture is a subclass (`MaskedElmoConfig`), with its own options.json
    keys.

    Example:
    >>> config = ElmoConfig.from_architecture("elmo_small")
    >>> config.lstm_dim, config.projection_dim, config.num_filters
    (1024, 128, 2048)
    """

    lstm_dim: int
    projection_dim: int
    n_layers: int
    char_embedding_dim: int
    filters: tuple
    cell_clip: float | None = None
    proj_clip: float | None = None
    use_skip_connections: bool = False
    n_highway: int = 0
    activation: str = "relu"
    max_characters_per_token: int = 50
    n_characters: int = 262
    training: dict = dataclasses.field(default_factory=dict, compare=False)

    # options.json's `lstm` keys this architecture reads: {key: required}; its training keys.
    LSTM_KEYS = _LSTM_KEYS
    TRAINING_KEYS = TRAINING_KEYS

    def __post_init__(self):
        problems = self.problems()
        if problems:
            raise ValueError(f"invalid {type(self).__name__}: " + "; ".join(problems) + ".")

    def problems(self):
        """What is wrong with the fields (a subclass adds its own checks)."""
        problems = positive_int_problems(**{
            name: getattr(self, name)
            for name in ("lstm_dim", "projection_dim", "n_layers", "char_embedding_dim")})
        try:
            filters = tuple((_integer(w), _integer(n)) for w, n in self.filters)
        except (TypeError, ValueError):
            problems.append(f"filters must be (width, n_filters) pairs of integers; got "
                            f"{self.filters!r}")
            filters = None
        object.__setattr__(self, "filters", filters or ())
        for name in ("n_highway", "max_characters_per_token", "n_characters"):
            if _is_integer(getattr(self, name)):
                object.__setattr__(self, name, int(getattr(self, name)))
            elif name != "n_characters":  # checked below
                problems.append(f"{name} must be an integer; got {getattr(self, name)!r}")
        chars = self.max_characters_per_token if _is_integer(self.max_characters_per_token) \
            else None
        if filters == ():
            problems.append("filters must list at least one (width, n_filters) pair")
        for width, n in filters or ():
            if not 1 <= width <= (chars or width) or n < 1:
                problems.append(
                    f"filter ({width}, {n}) needs 1 <= width <= max_characters_per_token "
                    f"({self.max_characters_per_token}) and n_filters >= 1")
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value > 0):
                problems.append(f"{name} must be positive or None; got {value!r}")
        if _is_integer(self.n_highway) and self.n_highway < 0:
            problems.append(f"n_highway must be >= 0; got {self.n_highway!r}")
        if self.activation not in ("relu", "tanh"):
            problems.append(f"activation must be 'relu' or 'tanh'; got {self.activation!r}")
        if chars is not None and chars < 4:
            problems.append(
                f"max_characters_per_token must be >= 4; got {self.max_characters_per_token!r}")
        if self.n_characters not in (261, 262):
            problems.append(f"n_characters must be 261 (training) or 262 (inference); got "
                            f"{self.n_characters!r}")
        unknown = sorted(set(self.training) - set(self.TRAINING_KEYS))
        if unknown:
            problems.append(f"unknown training keys {unknown}; accepted: "
                            f"{list(self.TRAINING_KEYS)}")
        return problems

    @property
    def num_filters(self):
        """Width of the char CNN output (the sum of n_filters)."""
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self):
        """Width 2P of every biLM layer output."""
        return 2 * self.projection_dim

    # --- preset architectures ---------------------------------------------------------------
    # {name: the fields}; other names for them. A subclass has its own.
    PRESETS = ELMO_PRESETS
    ALIASES = ALIASES

    @classmethod
    def presets(cls):
        """Names of this architecture's presets (`PRESETS`)."""
        return tuple(cls.PRESETS)

    @classmethod
    def from_architecture(cls, name):
        """The preset architecture `name` (see `presets()`; ELMo's released shapes also as
        `small`, `medium`, `original`): the shape only (a model built from it has fresh
        weights; `Backbone.from_preset` loads weights where a preset has them)."""
        name = cls.ALIASES.get(name, name)
        if name not in cls.PRESETS:
            raise ValueError(f"unknown {cls.__name__} preset {name!r}; available: "
                             f"{list(cls.PRESETS)}" + (f" (or {list(cls.ALIASES)})"
                                                       if cls.ALIASES else "") + ".")
        return cls(**cls.PRESETS[name])

    @classmethod
    def from_preset(cls, name):
        """`from_architecture` (a config is a shape; kept under the name elmo-tf 0.1 gave it)."""
        return cls.from_architecture(name)

    # --- options.json --------------------------------------------------------------------
    @classmethod
    def from_options(cls, options, source="options"):
        """Builds a config from a parsed options.json dict; errors name the bad keys."""
        if not isinstance(options, dict):
            raise ValueError(f"{source}: expected a JSON object; got {type(options).__name__}.")
        unknown = sorted(set(options) - {"lstm", "char_cnn", *cls.TRAINING_KEYS})
        if unknown:
            raise ValueError(f"{source}: unknown keys {unknown}; accepted: 'lstm', 'char_cnn' and "
                             f"the training keys {list(cls.TRAINING_KEYS)}.")
        lstm = _section(options, "lstm", cls.LSTM_KEYS, source,
                        hint=f" ({cls.__name__}'s; the options of another model family? "
                             "elmo_tf.models.load_backbone builds any family's model)")
        cnn = _section(options, "char_cnn", _CHAR_CNN_KEYS, source)
        embedding = cnn["embedding"]
        filters = cnn["filters"]
        if not isinstance(filters, list) or not all(isinstance(f, list) for f in filters):
            raise ValueError(f"{source}: char_cnn.filters must be a list of [width, n_filters] "
                             f"pairs, e.g. [[1, 32], [2, 32]]; got {json.dumps(filters)}.")
        if not isinstance(embedding, dict) or set(embedding) != {"dim"}:
            raise ValueError(f"{source}: char_cnn.embedding must be {{\"dim\": int}}; got {embedding!r}.")
        try:
            return cls(
                lstm_dim=lstm["dim"], projection_dim=lstm["projection_dim"],
                n_layers=lstm["n_layers"], char_embedding_dim=embedding["dim"],
                filters=tuple(tuple(f) for f in filters),
                cell_clip=lstm.get("cell_clip"), proj_clip=lstm.get("proj_clip"),
                use_skip_connections=bool(lstm.get("use_skip_connections") or False),
                n_highway=cnn.get("n_highway") or 0, activation=cnn["activation"],
                max_characters_per_token=cnn["max_characters_per_token"],
                n_characters=cnn["n_characters"],
                training={k: options[k] for k in cls.TRAINING_KEYS if k in options},
                **cls.fields_from_lstm_options(lstm))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: {error}") from None

    @classmethod
    def from_options_json(cls, path):
        """Reads bilm-tf's options.json."""
        return cls.from_options(read_json(path), source=str(path))

    def to_options(self):
        """The options.json dict (clips, skip connections and highways always written)."""
        options = {
            "lstm": {"dim": self.lstm_dim, "projection_dim": self.projection_dim,
                     "n_layers": self.n_layers, "cell_clip": self.cell_clip,
                     "proj_clip": self.proj_clip,
                     "use_skip_connections": self.use_skip_connections},
            "char_cnn": {"embedding": {"dim": self.char_embedding_dim},
                         "filters": [list(f) for f in self.filters],
                         "n_highway": self.n_highway, "activation": self.activation,
                         "max_characters_per_token": self.max_characters_per_token,
                         "n_characters": self.n_characters},
        }
        for name in ("cell_clip", "proj_clip"):
            if options["lstm"][name] is None:
                del options["lstm"][name]
        options.update(self.training)
        return options

    @classmethod
    def fields_from_lstm_options(cls, lstm):
        """The fields a subclass reads from its own `lstm` keys of options.json (none here)."""
        return {}

    def to_options_json(self, path):
        """Writes options.json atomically."""
        write_json_atomically(path, self.to_options())

    def to_dict(self):
        """A JSON-able dict for `get_config` (the inverse of `from_dict`)."""
        d = dataclasses.asdict(self)
        d["filters"] = [list(f) for f in self.filters]
        return d

    @classmethod
    def from_dict(cls, d):
        """The config of a `to_dict()` dict (or the config itself)."""
        return d if isinstance(d, cls) else cls(**d)


def _section(options, name, keys, source, hint=""):
    section = options.get(name)
    if not isinstance(section, dict):
        raise ValueError(f"{source}: missing the {name!r} section (a JSON object).")
    unknown = sorted(set(section) - set(keys))
    missing = sorted(k for k, required in keys.items() if required and k not in section)
    if unknown or missing:
        raise ValueError(
            f"{source}: {name} has " + " and ".join(
                part for part in (unknown and f"unknown keys {unknown}",
                                  missing and f"missing keys {missing}") if part)
            + f"; accepted: {sorted(keys)} (required: {sorted(k for k, r in keys.items() if r)})"
            + hint + ".")
    return section


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value):
    """An int, a NumPy integer or a whole-number float (JSON may give 2.0)."""
    return _is_number(value) and float(value).is_integer()


def _integer(value):
    """`value` as an int when `_is_integer`; else TypeError."""
    if _is_integer(value):
        return int(value)
    raise TypeError(value)
