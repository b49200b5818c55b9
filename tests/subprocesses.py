"""Time limits for the tests' subprocesses that load alone does not trip: each limit is what
the step may take on the idle 2-core development machine (generously), scaled by how much
slower this machine starts TensorFlow now than that one did (measured once per test process);
a step that runs past its limit fails naming itself, its command, the limit and its last
output."""

import functools
import subprocess
import sys
import time

import pytest

# `python -c "import tensorflow"` on the idle 2-core development machine (AMD EPYC: 2.7 to
# 2.8 s, 2026-11-28; 7.5 to 8.2 s beside two training runs), rounded down: a machine as fast
# gets the limits as written, a loaded or slower one more.
IDLE_START_SECONDS = 2.5


@functools.cache
def load_factor():
    """How many times longer than `IDLE_START_SECONDS` a Python process here takes to import
    TensorFlow now (at least 1)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import tensorflow"], check=True,
                   capture_output=True)
    return max(1.0, (time.perf_counter() - started) / IDLE_START_SECONDS)


def limit(seconds):
    """`seconds` on the idle development machine, in this machine's seconds now."""
    return seconds * load_factor()


def run(command, *, seconds, what, **kwargs):
    """`subprocess.run(command, **kwargs)` within `limit(seconds)`; past it, the test fails
    naming `what` was running."""
    timeout = limit(seconds)
    try:
        return subprocess.run(command, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{what} ran past its {timeout:.0f} s ({seconds} s on the idle development "
                    f"machine x {load_factor():.1f}, how much slower TensorFlow starts here "
                    f"now): {' '.join(map(str, command))}\n{_tail(error)}", pytrace=False)


def _tail(error):
    out = [o.decode(errors="replace") if isinstance(o, bytes) else o
           for o in (error.stdout, error.stderr) if o]
    return "\n".join(o[-2000:] for o in out) or "(no output)"
