"""`MaskedElmoSettings`: the pre-training hyper-parameters only Masked ELMo has."""

import dataclasses
from typing import ClassVar


@dataclasses.dataclass(frozen=True)
class MaskedElmoSettings:
    """The masked LM's hyper-parameters (`MaskedElmoFamily.settings_class`): a Masked ELMo
    recipe's `family_settings`. In a recipe file and in run.json they are keys beside the
    shared ones (`{"base": "tiny_masked", "selection_rate": 0.15}`), which other families'
    recipes refuse; `MaskedElmoFamily.recipe_problems` checks them.

    Args:
        masks_per_sentence: disjoint maskings of each sentence per batch (mask accumulation,
            `elmo_tf.data.masked_language_model_dataset`; sentence batches only).
        selection_rate: the fraction of tokens each masking selects for prediction (BERT's
            15 %; the Masked ELMo recipes select 40 %, measured in `docs/masked_elmo.md`; of
            those, 80 % become the mask token, 10 % a random word). At most
            1 / `masks_per_sentence`: the copies select disjoint tokens.
        next_token_weight: sentence batches: the weight of ELMo's next-token loss on the
            first layer, added to the masked LM's (0: BERT's loss alone;
            `MaskedElmoLanguageModel`, `docs/masked_elmo.md`).
        cloze_weight: the weight of a cloze loss on the first layer (every word predicted
            from the forward half before it and the backward half after it; on stream
            windows, of at least 3 tokens, every word but a window's first and last), added to
            the masked LM's (0: none; `MaskedElmoLanguageModel`).
        replaced_token_weight: sentence batches: the weight of ELECTRA's replaced-token
            detection (0: none; ELECTRA's is 50): the masked LM becomes a small generator and
            the backbone a discriminator (`MaskedElmoLanguageModel`; beyond the paper,
            `docs/masked_elmo.md`).

    Example:
    >>> recipe = Recipe.from_dict({"base": "tiny_masked", "selection_rate": 0.15})
    >>> recipe.family_settings.selection_rate
    0.15
    """

    # Added after runs recorded their recipes: left out of run.json at their defaults.
    ADDED_LATER: ClassVar = ("next_token_weight", "cloze_weight", "replaced_token_weight")

    masks_per_sentence: int = 1
    selection_rate: float = 0.15
    next_token_weight: float = 0.0
    cloze_weight: float = 0.0
    replaced_token_weight: float = 0.0
