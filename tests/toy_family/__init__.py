"""A toy third model family, to show that a family is a folder and a registry entry: it trains,
evaluates, dumps and exports through elmo-tf's command line with no change to
`elmo_tf/training`, `elmo_tf/export` or `elmo_tf/cli.py` (tests/test_families.py registers it).

The model is deliberately simple: a bag of characters per token, and for each position the
running mean of the tokens before it (forward) and after it (backward)."""

from tests.toy_family.toy_family import ToyFamily

__all__ = ["ToyFamily"]
