"""The `elmo-tf` command's entry point (pip's `console_scripts`), outside the `elmo_tf` package.

`import elmo_tf` imports TensorFlow: the package registers its Keras objects as it is imported,
so that `keras.saving` and KerasHub's loaders find them. This module imports neither, so that
`elmo-tf --help`, `elmo-tf --version` and a mistyped command answer at once. A command that
runs imports TensorFlow with its C++ start-up lines silenced (absl's INFO lines and the probing
of CUDA drivers, printed before any log level applies, would bury the command's own output;
stderr is restored before an error of the import itself propagates), then runs
`elmo_tf.cli.main_process`. `python -m elmo_tf` runs the same command, after the package's
import (TensorFlow's lines included).

Example:
    $ elmo-tf --help            # the commands, without TensorFlow
    $ elmo-tf train --help      # a command's flags (their choices come from the registries)
    $ python -m elmo_tf_launcher init --preset tiny --output model   # the same as `elmo-tf`
"""

import os
import sys

from elmo_tf_commands import COMMANDS, command_parser


def main(argv=None):
    """Runs `elmo-tf` with `argv` (default: `sys.argv[1:]`); returns its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:  # --help, --version, a missing or unknown command
        command_parser()[0].parse_known_args(argv)  # prints and exits, or leaves an unknown
        # option before a command (`--foo init ...`) to the whole parser's own message
    _import_tensorflow_quietly()
    from elmo_tf.cli import main_process

    return main_process(argv)


def _import_tensorflow_quietly():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        import tensorflow  # noqa: F401 (imported for its start-up, quietly)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


if __name__ == "__main__":
    sys.exit(main())
