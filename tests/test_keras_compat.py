"""Every private Keras/TensorFlow hook lives in elmo_tf/keras_compat.py, and that file refuses a
Keras or TensorFlow it was not written for."""

import ast
import pathlib
import re

import keras
import pytest
import tensorflow as tf

from elmo_tf.keras_compat import check_versions

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "elmo_tf"
PRIVATE = re.compile(r"\bkeras\.src\b|\btensorflow\.(python|core)\b|\btf\.__internal__\b|"
                     r"\._(flatten_layers|track_variable|convert_input_args|(maybe_)?symbolic_build|"
                     r"in_multi_worker_mode|clip_gradients|backend_update_step|save_state)\b")


def test_no_module_but_keras_compat_touches_private_keras_or_tensorflow():
    found = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path.name != "keras_compat.py"
             for number, line in enumerate(path.read_text().splitlines(), start=1)
             if PRIVATE.search(line)]
    assert found == []


def test_other_versions_are_refused_with_what_to_do():
    check_versions()  # the installed ones
    with pytest.raises(ImportError, match=r"Keras internals written for Keras 3\.15\.x, and "
                                          r"Keras 3\.16\.0 is installed: install the versions "
                                          r"setup\.cfg pins"):
        check_versions(keras_version="3.16.0", tensorflow_version=tf.__version__)
    with pytest.raises(ImportError, match=r"TensorFlow 2\.22\.0 is installed"):
        check_versions(keras_version=keras.__version__, tensorflow_version="2.22.0")


def test_progress_in_a_log_writes_a_plain_line_a_minute_and_one_at_the_end(capsys, monkeypatch):
    """Where the output is a file or a pipe (`progress_verbosity`: 2), Keras's bar prints only
    when it ends; `Progress` also says how far it got every `every` seconds, in plain text."""
    import time

    from elmo_tf.keras_compat import Progress

    clock = iter([0.0, 30.0, 61.0, 90.0, 125.0, 130.0])  # its start, then one time per update
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    bar = Progress(10_000, unit_name="sentence")  # capsys's stdout is no terminal
    for _ in range(5):
        bar.add(2_000)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" - ")[0] for line in lines[:2]] == ["4000/10000 sentences",
                                                            "8000/10000 sentences"]
    assert all(line.endswith("s so far") for line in lines[:2])
    assert len(lines) == 3 and lines[2].startswith("10000/10000")  # Keras's own, at the end
    assert not [line for line in lines if "\x1b" in line or "\r" in line or "\b" in line]


def test_progress_lines_follow_keras_to_absl_logging_when_interactive_logging_is_off(
        capsys, caplog, monkeypatch):
    """`keras.config.disable_interactive_logging()` sends Keras's progress lines to absl's
    log: `Progress`'s own lines go with them, not to stdout."""
    import logging
    import time

    from elmo_tf.keras_compat import Progress

    clock = iter([0.0, 61.0, 130.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    keras.config.disable_interactive_logging()
    try:
        with caplog.at_level(logging.INFO, logger="absl"):  # (another test may have raised it)
            bar = Progress(10, unit_name="sentence")
            bar.add(4)
            bar.add(6)
    finally:
        keras.config.enable_interactive_logging()
    assert capsys.readouterr().out == ""
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith("4/10 sentences - ") and messages[0].endswith("s so far")
    assert messages[-1].startswith("10/10")  # Keras's own, at the end


def test_autograph_traces_elmo_tfs_functions_as_written_and_still_converts_a_users(tmp_path):
    """`trace_without_autograph` (run as elmo_tf is imported): a Python `if` on a tensor is
    what AutoGraph rewrites (into a `tf.cond`); a user's function keeps that, a user's callable
    tokenizer (called inside elmo-tf's corpus pipeline) included, while the same function as
    one of elmo_tf's is traced as written, so its `if` fails as Python's does on a symbolic
    tensor. And every `tf.function` elmo_tf makes itself (AutoGraph converts the function a
    `tf.function` is given whatever its module) says whether AutoGraph converts it."""
    from elmo_tf.data.corpus import read_corpus

    def magnitude(x):
        if x > 0:
            return x
        return -x

    numbers = tf.data.Dataset.from_tensor_slices([-2, 3])
    assert list(numbers.map(magnitude).as_numpy_iterator()) == [2, 3]

    def tokenizer(lines):
        if tf.size(lines) > 0:  # (always, here: what matters is that it traces)
            return tf.strings.split(lines)
        return tf.strings.split(lines)

    (tmp_path / "corpus.txt").write_text("a b\nc\n")
    sentences = read_corpus(str(tmp_path / "corpus.txt"), tokenizer=tokenizer)
    assert [list(s) for s in sentences.as_numpy_iterator()] == [[b"a", b"b"], [b"c"]]
    magnitude.__module__ = "elmo_tf.keras_compat"  # now a function of elmo_tf's
    with pytest.raises(TypeError, match="Using a symbolic `tf.Tensor` as a Python `bool`"):
        numbers.map(magnitude)
    unsaid = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        calls = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and any(k.arg == "autograph" for k in node.keywords)}
        unsaid += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr == "function"
                   and isinstance(node.value, ast.Name) and node.value.id == "tf"
                   and id(node) not in calls]
    assert unsaid == []
