import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from elmo_tf import ElmoBackbone, tokens_to_char_ids
from elmo_tf.cli import main
from elmo_tf.files import temporary_prefix

SENTENCES = "The cat sat on the mat .\nELMo  works\n\nEin Satz auf Deutsch mit Ümlauten\n"


def test_embed_writes_the_bilm_tf_dump_layout(tiny_model, tmp_path, capsys):
    _, _, options_file, weight_file = tiny_model
    (tmp_path / "in.txt").write_text(SENTENCES, encoding="utf-8")
    out = tmp_path / "vectors.hdf5"
    assert main(["embed", "--options", str(options_file), "--weights", str(weight_file),
                 "--input", str(tmp_path / "in.txt"), "--output", str(out),
                 "--batch-size", "2"]) == 0
    printed = capsys.readouterr()
    assert "wrote 4 sentences (15 tokens)" in printed.out
    # The progress bar, on a stderr that is no terminal: one plain line (Keras's own bar is
    # redrawn in place with ANSI colours in any POSIX process).
    assert "4/4 - " in printed.err and not set("\x1b\b\r") & set(printed.err), printed.err
    backbone = ElmoBackbone.from_allennlp(options_file, weight_file)
    lines = [line.split() for line in SENTENCES.splitlines()]
    with h5py.File(out, "r") as f:
        assert sorted(f) == ["0", "1", "2", "3", "sentence_to_index"]
        index = json.loads(f["sentence_to_index"][0])
        assert index["ELMo works"] == "1"
        for i, tokens in enumerate(lines):
            assert f[str(i)].shape == (3, len(tokens), 16) and f[str(i)].dtype == np.float32
            if tokens:
                expected = backbone(tokens_to_char_ids([tokens]))["layers"].numpy()[0]
                np.testing.assert_allclose(f[str(i)][...], expected, atol=1e-5)


def test_embed_reads_stdin_and_init_writes_a_loadable_model(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cli = [sys.executable, "-m", "elmo_tf.cli"]
    subprocess.run(cli + ["init", "--preset", "small", "--output", str(tmp_path / "m"),
                          "--seed", "3"], check=True, env=env, capture_output=True)
    result = subprocess.run(
        cli + ["embed", "--options", str(tmp_path / "m/options.json"),
               "--weights", str(tmp_path / "m/weights.hdf5"), "--output",
               str(tmp_path / "v.hdf5")],
        input="hello world\n".encode(), env=env, capture_output=True, check=True)
    assert b"wrote 1 sentence (2 tokens)" in result.stdout
    with h5py.File(tmp_path / "v.hdf5", "r") as f:
        assert f["0"].shape == (3, 2, 256)


def test_bad_input_is_a_clear_error_and_writes_nothing(tiny_model, tmp_path, capsys):
    _, _, options_file, weight_file = tiny_model
    (tmp_path / "bad.txt").write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["embed", "--options", str(options_file), "--weights", str(weight_file),
              "--input", str(tmp_path / "bad.txt"), "--output", str(tmp_path / "v.hdf5")])
    assert exit_info.value.code == 2
    assert "line 2: not valid UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "v.hdf5").exists()
    with pytest.raises(SystemExit):
        main(["embed", "--options", str(tmp_path / "missing.json"), "--weights",
              str(weight_file), "--input", str(tmp_path / "bad.txt"), "--output", "x.hdf5"])
    with pytest.raises(SystemExit):
        main(["init", "--preset", "huge", "--output", str(tmp_path)])
    # Nothing a command reads is overwritten by what it writes: the model's own directory by
    # `init`, its weights or the sentence file by the vectors.
    (tmp_path / "in.txt").write_text("a sentence\n")
    weights = weight_file.read_bytes()
    for argv, message in (
            (["init", "--preset", "tiny", "--output", str(weight_file.parent)],
             f"--output {weight_file.parent} already holds a model (options.json, weights.hdf5)"),
            (["init", "--preset", "tiny", "--output", f"{tmp_path / 'in.txt'}/"],
             f"--output {tmp_path / 'in.txt'}/ is a file"),
            (["embed", "--options", str(options_file), "--weights", str(weight_file), "--input",
              str(tmp_path / "in.txt"), "--output", str(weight_file)],
             f"--output {weight_file} is the model's weights: give another path"),
            (["dump", str(tmp_path / "in.txt"), str(tmp_path / "in.txt"), "--options",
              str(options_file), "--weights", str(weight_file)],
             f"output {tmp_path / 'in.txt'} is the input file: give another path")):
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err
    assert weight_file.read_bytes() == weights
    assert (tmp_path / "in.txt").read_text() == "a sentence\n"


def test_sentences_split_on_ascii_whitespace_like_the_served_default_signature(tmp_path):
    from elmo_tf.cli import _read_sentences
    import tensorflow as tf

    line = "a\u00a0b  c\td"
    (tmp_path / "in.txt").write_text(line + "\n", encoding="utf-8")
    served = [t.decode() for t in tf.strings.split(tf.constant([line]))[0].numpy()]
    assert _read_sentences(str(tmp_path / "in.txt")) == [served] == [["a\u00a0b", "c", "d"]]


def test_dump_layouts_and_model_directory(tiny_model, tmp_path):
    _, _, options_file, _ = tiny_model
    (tmp_path / "in.txt").write_text(SENTENCES, encoding="utf-8")
    model_dir = str(options_file.parent)  # options.json + weights.hdf5, as `init` writes them
    dumped = {}
    for layers, shape in (("top", (7, 16)), ("average", (7, 16)), ("all", (3, 7, 16))):
        out = tmp_path / f"{layers}.hdf5"
        assert main(["dump", str(tmp_path / "in.txt"), str(out), "--model", model_dir,
                     "--layers", layers]) == 0
        with h5py.File(out, "r") as f:
            assert f["0"].shape == shape
            dumped[layers] = f["0"][...]
    np.testing.assert_array_equal(dumped["top"], dumped["all"][2])
    np.testing.assert_allclose(dumped["average"], dumped["all"].mean(0), atol=1e-6)
    assert np.abs(dumped["top"] - dumped["average"]).max() > 1e-3


def test_export_writes_versions_that_serve(tiny_model, tmp_path, capsys):
    _, _, options_file, weight_file = tiny_model
    base = tmp_path / "serving"
    for version in ("1", "2"):
        assert main(["export", "--options", str(options_file), "--weights", str(weight_file),
                     "--output", str(base)]) == 0
        assert f"{base / version}" in capsys.readouterr().out
        # What an export of the next version killed with -9 leaves (unlocked), and one of
        # elmo-tf 0.3.0's (`.export`): the next export removes both.
        stale = base / f"{temporary_prefix(str(int(version) + 1))}x{version}y2.tmp"
        old = base / f"{temporary_prefix('.export')}x{version}y3.tmp"
        (old / "variables").mkdir(parents=True)
        (stale / "variables").mkdir(parents=True)
    assert sorted(os.listdir(base)) == sorted(["1", "2", stale.name, old.name])
    import tensorflow as tf

    served = tf.saved_model.load(str(base / "2")).signatures["default"](
        default=tf.constant(["The cat sat ."]))
    assert served["elmo"].shape == (1, 4, 16)
    with pytest.raises(SystemExit):
        main(["export", "--model", str(tmp_path), "--weights", str(weight_file), "--output",
              str(base)])  # --model and --weights together


def test_the_installed_command_starts_quietly(tmp_path):
    """The `elmo-tf` entry point silences TensorFlow's start-up lines."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-m", "elmo_tf_launcher", "init", "--preset", "tiny",
                           "--output", str(tmp_path / "m")], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "wrote a random tiny ElmoBackbone" in done.stdout
    assert (tmp_path / "m" / "weights.hdf5").exists()


@pytest.mark.parametrize("argv, code, printed", [
    (["--version"], 0, "elmo-tf {version}\n"),
    (["--help"], 0, "usage: elmo-tf [-h] [--version] COMMAND ..."),
    ([], 2, "the following arguments are required: COMMAND"),
    (["trian"], 2, "invalid choice: 'trian' (choose from 'init', 'vocab', 'train',"),
    (["--foo", "init", "--preset", "tiny", "--output", "m"], 2,
     "\nelmo-tf: error: unrecognized arguments: --foo\n"),  # the whole parser's, not init's
])
def test_help_version_and_a_wrong_command_answer_without_tensorflow(argv, code, printed, capsys):
    """`elmo-tf --help`, `--version` and a missing or mistyped command answer before
    TensorFlow is imported (a process of its own, so that nothing imported it before), as the
    command line in-process does; the installed `elmo-tf` is this entry point."""
    from importlib import metadata

    from elmo_tf import __version__

    probe = ("import sys, elmo_tf_launcher\n"
             "try:\n    elmo_tf_launcher.main(%r)\nexcept SystemExit as e:\n"
             "    print('exit', e.code, 'tensorflow' in sys.modules, 'elmo_tf' in sys.modules,"
             " file=sys.stderr)") % argv
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    quick = done.stderr.splitlines()
    full = argv[:1] == ["--foo"]  # an unknown option before a command: the whole parser's
    assert quick[-1:] == [f"exit {code} {full} {full}"], done.stderr
    assert printed.format(version=__version__) in done.stdout + done.stderr
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    in_process = capsys.readouterr()
    assert exit_.value.code == code
    assert (in_process.out, in_process.err) == (done.stdout, "\n".join(quick[:-1] + [""]))
    assert metadata.entry_points(group="console_scripts")["elmo-tf"].value == \
        "elmo_tf_launcher:main"


def test_every_flag_has_help():
    """What `elmo-tf COMMAND --help` prints explains every flag."""
    from elmo_tf.cli import _parser

    subparsers = next(a for a in _parser()._actions if a.dest == "command").choices
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, command in subparsers.items() for action in command._actions
               if not action.help]
    assert missing == []


def test_an_abbreviated_flag_is_refused(tmp_path, capsys):
    """`--step 10` is not taken for `--steps 10` (argparse's default), in any command."""
    for argv in (["train", "--recipe", "tiny", "--corpus", "builtin", "--output",
                  str(tmp_path / "m"), "--step", "10"],
                 ["embed", "--model", str(tmp_path), "--output", str(tmp_path / "v.hdf5"),
                  "--batch", "4"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err  # under the command's usage, which lists its flags
        assert err.startswith(f"usage: elmo-tf {argv[0]} [-h]"), err
        assert err.endswith(f"elmo-tf {argv[0]}: error: unrecognized arguments: "
                            f"{argv[-2]} {argv[-1]}\n"), err
    assert os.listdir(tmp_path) == []


def test_a_url_output_is_refused_by_name_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    """`--output gs://bucket/elmo` never becomes a local folder `gs:`."""
    monkeypatch.chdir(tmp_path)
    for argv, flag in ((["init", "--preset", "tiny", "--output", "gs://bucket/elmo"], "--output"),
                       (["dump", "in.txt", "s3://bucket/v.hdf5", "--model", "m"], "output")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert f"{flag} {argv[-1] if flag == '--output' else argv[2]} is a URL; elmo-tf writes " \
            "to local paths only" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
