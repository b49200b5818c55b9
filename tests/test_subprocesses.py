"""The tests' subprocess limits (`tests/subprocesses.py`): scaled by the machine's load, and a
step past its limit fails naming what was running."""

import sys

import pytest

from tests import subprocesses


def test_a_step_past_its_limit_fails_naming_itself_and_its_output():
    assert subprocesses.load_factor() >= 1.0
    assert subprocesses.limit(10) == pytest.approx(10 * subprocesses.load_factor())
    with pytest.raises(pytest.fail.Exception, match=r"(?s)a sleeper ran past its \d+ s \(2 s "
                                                    r"on the idle .*sleep.*started"):
        subprocesses.run([sys.executable, "-c",
                          "import time; print('started', flush=True); time.sleep(60)"],
                         seconds=2, what="a sleeper", capture_output=True, text=True)
