"""Argument checks shared across the package, with one wording for each problem."""

import math

MISSING = object()  # a field a record does not have (`damaged_field`)


def is_number(value):
    """Whether `value` is a finite int or float (bools are not).

    Example:
    >>> is_number(2.5), is_number(float("nan")), is_number(True), is_number("2")
    (True, False, False, False)
    """
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and (isinstance(value, int) or math.isfinite(value)))  # (an int of 400 digits too)


def is_whole(value, low):
    """Whether `value` is an integer >= `low` (bools are not).

    Example:
    >>> is_whole(3, 1), is_whole(0, 1), is_whole(3.0, 1), is_whole(True, 0)
    (True, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def positive_int_problems(**values):
    """A problem string for each value that is not a positive integer (bools are not), e.g.
    `["batch_size must be a positive integer; got 0"]`."""
    return [f"{name} must be a positive integer; got {value!r}" for name, value in values.items()
            if not is_whole(value, 1)]


def non_negative_number_problems(**values):
    """A problem string for each value that is not a finite number >= 0 (bools are not), e.g.
    `["next_token_weight must be a number >= 0; got -1"]`."""
    return [f"{name} must be a number >= 0; got {value!r}" for name, value in values.items()
            if not (is_number(value) and value >= 0)]


def damaged_field(path, field, value, command, accepted, remedy):
    """The ValueError for a run.json (`path`) whose `field` holds `value` (`MISSING`: none)
    where `elmo-tf command` writes what `accepted` says; `remedy`: the other way out.

    Example:
    >>> raise damaged_field("runs/tiny/run.json", '"steps"', 2.5, "train",
    ...                     "a whole number of steps above 0", "train the run again")
    Traceback (most recent call last):
    ValueError: runs/tiny/run.json: "steps" is 2.5, where `elmo-tf train` writes a whole number
    of steps above 0: put back what it wrote, or train the run again.
    """
    found = "is missing" if value is MISSING else f"is {value!r}"
    return ValueError(f"{path}: {field} {found}, where `elmo-tf {command}` writes {accepted}: "
                      f"put back what it wrote, or {remedy}.")


def check_non_negative_int(name, value, meaning=""):
    """Raises a ValueError unless `value` is an integer >= 0 (bools are not); `meaning` says
    what 0 means, in the message.

    Example:
    >>> check_non_negative_int("word_embedding_dim", -1, "0: ELMo alone")
    Traceback (most recent call last):
    ValueError: word_embedding_dim must be an integer >= 0 (0: ELMo alone); got -1.
    """
    if not is_whole(value, 0):
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
