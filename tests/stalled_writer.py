"""`python -m tests.stalled_writer NAME_REGEX ARGS...` runs `elmo-tf ARGS...` with the rename
of a temporary onto a file or directory whose name matches NAME_REGEX stalled: the process
then sleeps holding the temporary's lock, as a writer does until its file is complete, so a
test can kill -9 it while it writes, at a known point, however fast the write is."""

import os
import re
import sys
import time

from elmo_tf import cli


def _stalling(replace, pattern):
    def stalled_replace(source, target, *args, **kwargs):
        if (os.fspath(source).endswith(".tmp")
                and re.fullmatch(pattern, os.path.basename(os.fspath(target)))):
            time.sleep(3600)
        return replace(source, target, *args, **kwargs)

    return stalled_replace


if __name__ == "__main__":
    os.replace = _stalling(os.replace, sys.argv[1])
    sys.exit(cli.main_process(sys.argv[2:]))
