"""`StepTimes`: the speed a run records, from the clock, leaving out the first fifth of the
steps and what runs between intervals."""

import pytest

from elmo_tf.training import step_times
from elmo_tf.training.step_times import StepTimes


class _Run:
    def __init__(self):
        self.written = []

    def write_record(self, record):
        self.written.append(dict(record))


def test_the_steady_steps_leave_out_the_first_fifth_and_what_runs_between_intervals(
        monkeypatch, caplog):
    # Two intervals of 10 steps: the first step ends at 60 s (compilation), the next three
    # take 2.5 s (new batch shapes), every other 0.5 s; 30 s of checkpoint between intervals.
    ends = [60.0]
    for seconds in [2.5] * 3 + [0.5] * 6:
        ends.append(ends[-1] + seconds)
    ends.append(ends[-1] + 30.0 + 0.5)
    for _ in range(9):
        ends.append(ends[-1] + 0.5)
    clock = iter([0.0] + ends)
    monkeypatch.setattr(step_times.time, "monotonic", lambda: next(clock))
    run, record = _Run(), {"steps": 20}
    callback = StepTimes(run, record, tokens_per_step=1000.0)
    caplog.set_level("INFO", logger="elmo_tf")
    callback.on_train_begin()
    for epoch in range(2):
        callback.on_epoch_begin(epoch)
        for batch in range(10):
            callback.on_train_batch_end(batch)
    callback.on_train_end()
    # The first fifth (4 steps) left out: the three of 2.5 s among them; the checkpoint too.
    assert record["speed"] == {"steps": 20, "first_step_seconds": 60.0,
                               "steady_seconds_per_step": pytest.approx(0.5),
                               "tokens_per_second": pytest.approx(2000.0)}
    assert run.written == [record]
    # The first step's time, said once when it ends (the ETA of the progress bar's first step
    # is that step's alone).
    said = [r.getMessage() for r in caplog.records if "first step" in r.getMessage()]
    assert said == ["first step: 60.0 s, tracing and compiling included (the ETA leaves it "
                    "out from the second step on)"]


def test_few_steps_record_no_steady_time_and_another_worker_writes_nothing(monkeypatch):
    clock = iter([0.0, 5.0, 5.5, 6.0])
    monkeypatch.setattr(step_times.time, "monotonic", lambda: next(clock))
    record = {}
    callback = StepTimes(None, record, tokens_per_step=10.0)
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    for batch in range(3):
        callback.on_train_batch_end(batch)
    callback.on_train_end()
    assert record["speed"] == {"steps": 3, "first_step_seconds": 5.0}


def test_each_epoch_s_seconds_include_the_callbacks_before_it_and_tokens_may_be_unknown(
        monkeypatch):
    # Fine-tuning's record: 2 epochs of 5 steps of 1 s, each ended by 4 s of dev scoring (a
    # callback before this one), the first step 10 s (compilation); no tokens per step.
    clock = [0.0]
    for epoch in range(2):
        for step in range(5):
            clock.append(clock[-1] + (10.0 if clock[-1] == 0.0 else 1.0))
        clock.append(clock[-1] + 4.0)  # the epoch's end, after the scoring
    times = iter(clock)
    monkeypatch.setattr(step_times.time, "monotonic", lambda: next(times))
    run, record = _Run(), {}
    callback = StepTimes(run, record, tokens_per_step=None)
    callback.on_train_begin()
    for epoch in (3, 4):  # a run resumed after 3 epochs
        callback.on_epoch_begin(epoch)
        for batch in range(5):
            callback.on_train_batch_end(batch)
        callback.on_epoch_end(epoch)
    callback.on_train_end()
    assert record["speed"] == {"steps": 10, "first_step_seconds": 10.0,
                               "steady_seconds_per_step": pytest.approx(1.0),
                               "first_epoch": 3, "epoch_seconds": [18.0, 9.0]}
    # Written at each epoch's end too: a run stopped after its first epoch keeps its speed.
    assert run.written[0]["speed"] == {"steps": 5, "first_step_seconds": 10.0,
                                       "steady_seconds_per_step": pytest.approx(1.0),
                                       "first_epoch": 3, "epoch_seconds": [18.0]}
    assert len(run.written) == 3
