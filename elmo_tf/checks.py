"""Argument checks shared across the package, with one wording for each problem."""

import math


def positive_int_problems(**values):
    """A problem string for each value that is not a positive integer (bools are not), e.g.
    `["batch_size must be a positive integer; got 0"]`."""
    return [f"{name} must be a positive integer; got {value!r}" for name, value in values.items()
            if isinstance(value, bool) or not isinstance(value, int) or value < 1]


def non_negative_number_problems(**values):
    """A problem string for each value that is not a finite number >= 0 (bools are not), e.g.
    `["next_token_weight must be a number >= 0; got -1"]`."""
    return [f"{name} must be a number >= 0; got {value!r}" for name, value in values.items()
            if isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value < 0]


def check_non_negative_int(name, value, meaning=""):
    """Raises a ValueError unless `value` is an integer >= 0 (bools are not); `meaning` says
    what 0 means, in the message.

    Example:
    >>> check_non_negative_int("word_embedding_dim", -1, "0: ELMo alone")
    Traceback (most recent call last):
    ValueError: word_embedding_dim must be an integer >= 0 (0: ELMo alone); got -1.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0{f' ({meaning})' if meaning else ''}; "
                         f"got {value!r}.")


def check_positive_ints(**values):
    """Raises a ValueError naming every value that is not a positive integer.

    Example:
    >>> check_positive_ints(batch_size=32, window=0)
    Traceback (most recent call last):
    ValueError: window must be a positive integer; got 0.
    """
    problems = positive_int_problems(**values)
    if problems:
        raise ValueError("; ".join(problems) + ".")
