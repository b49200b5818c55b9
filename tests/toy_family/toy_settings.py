"""`ToySettings`: the pre-training hyper-parameter only the toy has."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class ToySettings:
    """`ToyFamily.settings_class`: a toy recipe's `family_settings`.

    Args:
        reverse: train on each sentence read backwards (the word before each word its
            target), not forwards.
    """

    reverse: bool = False
