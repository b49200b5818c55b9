"""`StepTimes`: the training speed a run records about itself."""

import logging
import time

import keras

logger = logging.getLogger("elmo_tf")


class StepTimes(keras.callbacks.Callback):
    """Records at each epoch's end and when `fit` ends the speed of the steps it took, in the
    run's record (run.json's `"speed"`, the last process's: a resumed run records its own):

    * `first_step_seconds`: from the start of `fit` to the end of its first step (tracing, and
      XLA's compilation, included);
    * `steady_seconds_per_step`: the wall seconds per step of the steps after the first fifth
      (which trace, or compile, each new batch shape), leaving out what runs between
      intervals (checkpoints, validation); with at least 5 steps;
    * `tokens_per_second`: `tokens_per_step` at that speed (where it is given);
    * `steps`: the steps timed;
    * `epoch_seconds`: each epoch's wall seconds, from the end of the one before (or the start
      of `fit`) to its end, the `on_epoch_end` of the callbacks before this one included (a
      fine-tuning run's dev scoring and checkpoint); `first_epoch`: the first of them (0-based:
      a resumed run times its own epochs). Also recorded at each epoch's end, so that a run
      stopped midway keeps the speed of its epochs so far.

    The first step's seconds are also logged when it ends: Keras's progress bar bases its
    first ETA on that step alone (tracing and compilation included) and leaves it out from the
    second step on.

    What the benchmarks read (`bench/pretraining_value.py`'s calibration), instead of Keras's
    progress bar.

    Args:
        run: the `RunDirectory` whose record is written (None: not written, e.g. a
            multi-worker run's other workers).
        record: the run's record (a dict, updated).
        tokens_per_step: corpus tokens read per (global) step (None: not known, as for
            fine-tuning's batches of sentences).

    Example:
    >>> lm.fit(data, callbacks=[StepTimes(run, record, tokens_per_step=2048.0)])
    >>> record["speed"]["steady_seconds_per_step"]
    0.388
    """

    def __init__(self, run, record, tokens_per_step):
        super().__init__()
        self.run, self.record, self.tokens_per_step = run, record, tokens_per_step
        self.began, self.ends, self.epoch, self.epoch_ends = None, [], None, []
        self.first_epoch = None

    def on_train_begin(self, logs=None):
        self.began, self.ends, self.epoch_ends = time.monotonic(), [], []
        self.first_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        if self.first_epoch is None:
            self.first_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append((self.epoch, time.monotonic()))
        if len(self.ends) == 1 and self.run is not None:
            logger.info("first step: %.1f s, tracing and compiling included (the ETA leaves "
                        "it out from the second step on)", self.ends[0][1] - self.began)

    def on_epoch_end(self, epoch, logs=None):
        # Recorded at every epoch's end too: a run stopped before `fit` ends keeps its speed.
        self.epoch_ends.append(time.monotonic())
        self._record()

    def on_train_end(self, logs=None):
        self._record()

    def _record(self):
        if not self.ends:
            return
        speed = {"steps": len(self.ends),
                 "first_step_seconds": round(self.ends[0][1] - self.began, 3)}
        # The seconds of each step after the first: since the step before, in its interval.
        steps = [(later - earlier) for (e, earlier), (f, later) in zip(self.ends, self.ends[1:])
                 if e == f]
        steady = steps[len(self.ends) // 5:]
        if len(self.ends) >= 5 and steady:
            seconds = sum(steady) / len(steady)
            speed["steady_seconds_per_step"] = round(seconds, 5)
            if self.tokens_per_step is not None:
                speed["tokens_per_second"] = round(self.tokens_per_step / seconds, 1)
        if self.epoch_ends:  # this process's epochs: a resumed run's from `first_epoch` on
            speed["first_epoch"] = self.first_epoch
            speed["epoch_seconds"] = [round(end - start, 3) for start, end in
                                      zip([self.began, *self.epoch_ends], self.epoch_ends)]
        self.record["speed"] = speed
        if self.run is not None:
            self.run.write_record(self.record)
