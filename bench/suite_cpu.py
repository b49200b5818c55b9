"""The test suite's CPU work, test by test: README's test command (`pytest -q`, its two xdist
workers) run with this module as a pytest plugin, which records each test's setup, call and
teardown in CPU seconds: its worker process's, and its child processes' (those waited for).

    python bench/suite_cpu.py [--output bench/results/suite_cpu-cpu.json] [PYTEST_ARGS ...]

On 2 cores the suite is bound by its CPU work, and a test's wall time in it depends on what the
other worker runs meanwhile: `--durations` once showed 116 s for a fixture that takes 14 s
alone, and 13 s of CPU in the suite too. A single-threaded test's CPU seconds hardly depend on
that; a multi-threaded process's do (TensorFlow's threads spin while they wait, more so beside
an idle core): the mirrored strategy fixture took 114, 144 and 168 CPU seconds in three runs
of nearly the same tests. Compare modules over several runs, not one. Writes how long
`python -c "import tensorflow"` takes here (three times, before the suite), the run's wall
seconds, its user and system CPU seconds (the pytest processes and every waited-for child),
pytest's summary line and the tests that failed (`-ra`'s lines), the CPU seconds per module,
the 40 tests and fixtures that took the most, every test's CPU seconds over 1 s (its phases
and fixtures together), and each worker's modules in the order it ran them, with how long one
worker sat idle at the end.
"""

import argparse
import collections
import datetime
import glob
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRECTORY = "ELMO_TF_SUITE_CPU_DIR"  # where each pytest process writes its rows
TOP = 40


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


_ROWS = []  # [node id, phase, own CPU s, children's CPU s, wall s, worker, start (epoch s)]


def _phase(name):
    def hook(item):
        own, children, started, epoch = *_cpu(), time.perf_counter(), time.time()
        yield
        after = _cpu()
        _ROWS.append([item.nodeid, name, after[0] - own, after[1] - children,
                      time.perf_counter() - started,
                      os.environ.get("PYTEST_XDIST_WORKER", "controller"), epoch])
    hook.__name__ = f"pytest_runtest_{name}"
    return hook


if os.environ.get(DIRECTORY):  # loaded by pytest as a plugin (`-p bench.suite_cpu`)
    import pytest

    pytest_runtest_setup = pytest.hookimpl(hookwrapper=True)(_phase("setup"))
    pytest_runtest_call = pytest.hookimpl(hookwrapper=True)(_phase("call"))
    pytest_runtest_teardown = pytest.hookimpl(hookwrapper=True)(_phase("teardown"))

    def pytest_sessionfinish(session):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
        with open(os.path.join(os.environ[DIRECTORY], f"{worker}.json"), "w") as f:
            json.dump(_ROWS, f)


def report(rows):
    """Per module and per test (fixtures apart), CPU seconds, from the plugin's rows; and each
    worker's modules in the order it ran them, with their first start and last end in seconds
    from the suite's first test (where the suite's wall time goes: a worker that ends early
    leaves a core idle)."""
    modules, tests = collections.Counter(), collections.Counter()
    for node, _, own, children, *_ in rows:
        modules[node.split("::")[0]] += own + children
        tests[node] += own + children  # its phases together, its fixtures' setup included
    top = sorted(rows, key=lambda r: -(r[2] + r[3]))[:TOP]
    start = min((r[6] for r in rows), default=0.0)  # no rows: no test ran
    workers = collections.defaultdict(dict)  # worker: {module: [first start, last end]}
    for node, _, _, _, wall, worker, epoch in sorted(rows, key=lambda r: r[6]):
        span = workers[worker].setdefault(node.split("::")[0], [epoch - start, 0.0])
        span[1] = max(span[1], epoch + wall - start)
    ends = [max(end for _, end in spans.values()) for spans in workers.values()] or [0.0]
    return {"cpu_seconds_in_tests": round(sum(r[2] + r[3] for r in rows), 1),
            "modules": {m: round(s, 1) for m, s in modules.most_common()},
            "top": [{"test": node, "phase": phase, "cpu_seconds": round(own + children, 1),
                     "children_cpu_seconds": round(children, 1), "wall_seconds": round(wall, 1)}
                    for node, phase, own, children, wall, *_ in top],
            "tests_over_a_second": {t: round(s, 1) for t, s in tests.most_common() if s >= 1},
            "idle_tail_seconds": round(max(ends) - min(ends), 1),
            "workers": {worker: [[module, round(first, 1), round(last, 1)]
                                 for module, (first, last) in spans.items()]
                        for worker, spans in sorted(workers.items())}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "suite_cpu-cpu.json"))
    args, pytest_args = parser.parse_known_args()
    sys.path.insert(0, ROOT)
    from bench.inference import machine, versions
    from elmo_tf.files import write_json_atomically

    # The host's speed, for comparing runs across hosts (of one type too, they differ up to 2x):
    # `python -c "import tensorflow"`, the reference of the tests' subprocess limits
    # (`tests/subprocesses.py`: 2.5 s on the idle development machine of issue 37's figures).
    start_up = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import tensorflow"], check=True,
                       capture_output=True)
        start_up.append(round(time.perf_counter() - started, 2))
    with tempfile.TemporaryDirectory() as directory:
        env = dict(os.environ, **{DIRECTORY: directory},
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "bench.suite_cpu", *pytest_args]
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows = []
        for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
            with open(path) as f:
                rows.extend(json.load(f))
    summary = [line for line in done.stdout.splitlines()
               if re.search(r"\d+ (passed|failed)", line)]
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "versions": versions(),
              "command": " ".join(["python", "bench/suite_cpu.py", *sys.argv[1:]]),
              "pytest": " ".join(command[1:]), "exit_status": done.returncode,
              "summary": summary[-1] if summary else done.stdout[-500:],
              "failed": [line for line in done.stdout.splitlines()
                         if line.startswith(("FAILED ", "ERROR "))],
              "tensorflow_import_seconds": start_up,
              "wall_seconds": round(wall, 1),
              "user_cpu_seconds": round(after.ru_utime - before.ru_utime, 1),
              "system_cpu_seconds": round(after.ru_stime - before.ru_stime, 1),
              **report(rows)}
    write_json_atomically(args.output, result)
    print(f"{result['summary']}; {wall:.0f} s wall, "
          f"{result['user_cpu_seconds'] + result['system_cpu_seconds']:.0f} s CPU "
          f"({result['cpu_seconds_in_tests']:.0f} s in the tests); wrote {args.output}")
    for name, seconds in list(result["modules"].items())[:15]:
        print(f"{seconds:8.1f}  {name}")
    print(f"one worker idle for the last {result['idle_tail_seconds']:.0f} s")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
