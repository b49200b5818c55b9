"""`MaskedElmoConfig`: the shape of a Masked ELMo biLM, ELMo's with its own options.json keys."""

import dataclasses

from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_presets import MASKED_ELMO_PRESETS


@dataclasses.dataclass(frozen=True)
class MaskedElmoConfig(ElmoConfig):
    """The architecture of a Masked ELMo biLM: ELMo's (`ElmoConfig`: the char CNN, highways,
    projection and LSTM sizes, the same options.json), with fully bidirectional layers (layer
    k + 1 of both directions reads both directions of layer k; `MaskedElmoBackbone`).

    In options.json it is marked by elmo-tf's own key `lstm.fully_bidirectional: true`
    (released ELMo files never have it), and cells without projection by `lstm.projection:
    false`; a trained model's training keys also hold how its masked LM was trained
    (`"masked_lm": {"selection_rate": ..., "masks_per_sentence": ...,
    "next_token_weight": ...}`).

    Args:
        (those of `ElmoConfig`, and)
        lstm_projection: False for cells without projection (`o * tanh(c)` is the output, so
            `projection_dim` must equal `lstm_dim`, without `proj_clip`).

    Example:
    >>> config = MaskedElmoConfig.from_architecture("tiny_masked")
    >>> config.cell_clip, config.lstm_projection
    (None, True)
    """

    lstm_projection: bool = True

    LSTM_KEYS = {**ElmoConfig.LSTM_KEYS, "fully_bidirectional": True, "projection": False}
    TRAINING_KEYS = (*ElmoConfig.TRAINING_KEYS, "masked_lm")
    PRESETS = MASKED_ELMO_PRESETS
    ALIASES = {}

    def problems(self):
        problems = super().problems()
        if not isinstance(self.lstm_projection, bool):
            problems.append(f"lstm_projection must be true or false; got "
                            f"{self.lstm_projection!r}")
        elif not self.lstm_projection and (self.projection_dim != self.lstm_dim
                                           or self.proj_clip is not None):
            problems.append(
                "cells without projection (lstm_projection false) output their lstm_dim "
                f"units: they need projection_dim == lstm_dim and no proj_clip; got "
                f"projection_dim={self.projection_dim}, lstm_dim={self.lstm_dim}, "
                f"proj_clip={self.proj_clip}")
        return problems

    @classmethod
    def fields_from_lstm_options(cls, lstm):
        if lstm["fully_bidirectional"] is not True:
            raise ValueError(f"lstm.fully_bidirectional must be true in a Masked ELMo "
                             f"options.json; got {lstm['fully_bidirectional']!r}")
        return {"lstm_projection": lstm.get("projection", True)}

    def to_options(self):
        options = super().to_options()
        options["lstm"]["fully_bidirectional"] = True
        if not self.lstm_projection:
            options["lstm"]["projection"] = False
        return options

    def to_dict(self):
        d = super().to_dict()
        if self.lstm_projection:  # as written before the field existed
            del d["lstm_projection"]
        return d

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            # Written when ElmoConfig had the field (`.keras` files of this release's
            # predecessors): always true for Masked ELMo.
            d = {k: v for k, v in d.items() if k != "fully_bidirectional"}
        return super().from_dict(d)
