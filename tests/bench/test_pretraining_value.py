"""The protocol's own arithmetic and bookkeeping (bench/pretraining_value.py): step times and
what a step reads and supervises from a run's record, and what a stopped run leaves recorded."""

import dataclasses
import json
import os
import shutil

import h5py
import numpy as np
import pytest

from bench import pretraining_value
from bench.pretraining_value import steady_seconds_per_step
from elmo_tf.models.family import architecture
from elmo_tf.recipes import Recipe


def test_every_model_is_a_recipe_and_the_wide_ones_double_the_cpu_recipes_lstms(tmp_path):
    recipes = {name: Recipe.from_file(pretraining_value._recipe_file(str(tmp_path), name))
               for name in pretraining_value.MODELS}
    for wide, base in (("elmo_wide", "elmo_cpu"), ("masked_elmo_wide", "masked_elmo_cpu")):
        assert recipes[wide].model == dataclasses.replace(
            architecture(base), lstm_dim=512, projection_dim=256)
        # Everything else is the CPU recipe's (without the cloze loss masked_elmo_cpu took
        # after the wide runs were measured).
        assert dataclasses.replace(recipes[wide], model=architecture(base), name=base,
                                   family_settings=Recipe.from_name(base).family_settings) == \
            Recipe.from_name(base)


def test_the_calibration_reads_the_speed_a_run_recorded(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"speed": {
        "steps": 60, "first_step_seconds": 9.1, "steady_seconds_per_step": 0.388}}))
    assert steady_seconds_per_step(str(tmp_path)) == 0.388
    (tmp_path / "run.json").write_text(json.dumps({"speed": {"steps": 3}}))
    with pytest.raises(ValueError, match="records no steady step time"):
        steady_seconds_per_step(str(tmp_path))


def test_calibrations_and_runs_name_one_xla_mode_and_the_kept_ones_still_match(monkeypatch):
    # `train --xla auto` would compile a CPU run of 1,000 steps and more, not the 60-step
    # calibration: the protocol names the mode for both. The calibrations kept from before it
    # named one (train_args [] on the EPYC, auto = off there) still match, so a rerun does
    # not calibrate (and retrain) anew.
    import argparse

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "results",
                           "pretraining_value-cpu-issue38.json")) as f:
        kept = json.load(f)["calibration"]["elmo"]
    assert kept["train_args"] == [] and not kept["machine"]["gpus"]
    epyc, gpu = dict(kept["machine"]), dict(kept["machine"], gpus=["/device:GPU:0"])
    xeon = dict(kept["machine"], cpu="Intel Xeon", isa=["amx_bf16", "amx_tile", "avx512f"])
    for here, default in ((epyc, "off"), (xeon, "off"), (gpu, "on")):
        monkeypatch.setattr(pretraining_value, "machine", lambda here=here: here)
        args = argparse.Namespace(mixed_precision=None, xla=None)
        assert pretraining_value._train_args(args) == ["--xla", default]
        assert pretraining_value._recorded_train_args(dict(kept, machine=here)) == [
            "--xla", default]
        args.xla, args.mixed_precision = "on", "bfloat16"
        assert pretraining_value._train_args(args) == ["--mixed-precision", "bfloat16",
                                                       "--xla", "on"]
    # So `calibrations` keeps the EPYC's calibration on that machine, and measures anew with
    # another mode.
    def calibrate(*_):
        raise AssertionError("calibrated again")

    monkeypatch.setattr(pretraining_value, "calibrate", calibrate)
    monkeypatch.setattr(pretraining_value, "machine", lambda: epyc)
    args = argparse.Namespace(mixed_precision=None, xla=None, runs="unused",
                              calibration_steps=kept["steps"], calibration_from=None)
    report = {"calibration": {"elmo": dict(kept)}}
    assert pretraining_value.calibrations({}, args, ["elmo"], report, lambda: None) == {
        "elmo": kept}
    args.xla = "on"
    with pytest.raises(AssertionError, match="calibrated again"):
        pretraining_value.calibrations({}, args, ["elmo"], report, lambda: None)


def test_calibrations_from_another_report_are_taken_as_they_are_on_any_machine(
        monkeypatch, tmp_path):
    # `--calibration-from`: another machine's seconds per step, measured with the same
    # training arguments, are the runs' (their steps that machine's minutes); nothing is
    # calibrated here; missing or measured otherwise, an error that names what it holds.
    import argparse

    def calibrate(*_):
        raise AssertionError("calibrated here")

    monkeypatch.setattr(pretraining_value, "calibrate", calibrate)
    monkeypatch.setattr(pretraining_value, "machine", lambda: {"cpu": "Intel Xeon", "gpus": []})
    epyc = {"cpu": "AMD EPYC", "gpus": []}
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps({"calibration": {
        "elmo": {"seconds_per_step": 0.42, "steps": 60, "train_args": ["--xla", "off"],
                 "machine": epyc},
        "old": {"seconds_per_step": 0.5, "steps": 60, "train_args": [], "machine": epyc},
        "bf16": {"seconds_per_step": 0.3, "steps": 60, "machine": epyc,
                 "train_args": ["--mixed-precision", "bfloat16", "--xla", "off"]}}}))
    args = argparse.Namespace(mixed_precision=None, xla=None, runs="unused",
                              calibration_steps=10, calibration_from=str(theirs))
    saved = []
    report = {"calibration": {"elmo": {"seconds_per_step": 9.0, "machine": {"cpu": "x"}}}}
    calibration = pretraining_value.calibrations({}, args, ["elmo", "old"], report,
                                                 lambda: saved.append(1))
    source = str(theirs)  # tmp_path: outside the repository
    assert calibration["elmo"] == {"seconds_per_step": 0.42, "steps": 60, "machine": epyc,
                                   "train_args": ["--xla", "off"], "from": source}
    assert calibration["old"]["seconds_per_step"] == 0.5 and saved == [1, 1]
    pretraining_value.calibrations({}, args, ["elmo"], report, lambda: saved.append(1))
    assert saved == [1, 1]  # already taken: not saved again
    # Measured again there: taken again. Taken there from a third report: that one named too.
    mine = json.loads(theirs.read_text())
    for change in ({"seconds_per_step": 0.4}, {"from": "first.json"}):
        mine["calibration"]["elmo"].update(change)
        theirs.write_text(json.dumps(mine))
        pretraining_value.calibrations({}, args, ["elmo"], report, lambda: saved.append(1))
        assert report["calibration"]["elmo"]["seconds_per_step"] == 0.4
    assert report["calibration"]["elmo"]["from"] == source and saved == [1, 1, 1, 1]
    assert report["calibration"]["elmo"]["first_from"] == "first.json"
    # Outside the repository, the file's absolute path (the same from any clone).
    assert report["calibration"]["old"]["from"] == source
    # A later command on the same report that forgets the option is refused, not calibrated,
    # whichever models it names.
    args.calibration_from = None
    for names in (["elmo"], ["masked_elmo"]):
        with pytest.raises(SystemExit, match=f"taken from .* give --calibration-from {source}"):
            pretraining_value.calibrations({}, args, names, report, lambda: None)
    args.calibration_from = str(theirs)
    # A report in the repository is named as the repository names it, from any clone.
    path = os.path.join(pretraining_value.ROOT, "bench", "results",
                        "pretraining_value-cpu-stream-footing.json")
    assert pretraining_value.borrowed(path, ["elmo"], ["--xla", "off"], {}, lambda: None)[
        "elmo"]["from"] == "bench/results/pretraining_value-cpu-stream-footing.json"
    # A missing or damaged file: one line naming it.
    (tmp_path / "damaged.json").write_text('{"calibration": ')
    (tmp_path / "list.json").write_text("[]")
    for bad in ("absent.json", "damaged.json", "list.json"):
        with pytest.raises(SystemExit, match=f"--calibration-from .*{bad}: not a readable "
                                             "report JSON"):
            pretraining_value.borrowed(str(tmp_path / bad), ["elmo"], [], {}, lambda: None)
    for names in (["bf16"], ["missing"]):
        with pytest.raises(SystemExit, match=f"no calibration of '{names[0]}' with the "
                           r"training arguments \['--xla', 'off'\] \(it holds: elmo "):
            pretraining_value.calibrations({}, args, names, report, lambda: None)


def test_a_budget_is_saved_once_kept_and_a_stopped_evaluation_is_not_trained_again(
        tmp_path, monkeypatch):
    """`pretrain` records a budget's biLM as soon as it is kept (a deadline may stop the
    evaluation after it), and a rerun evaluates it without training it again."""
    calls, stop_evaluation = [], [True]

    def fake_run(command, log=None):  # what `elmo-tf train` and `evaluate` leave behind
        verb, output = command[3], command[command.index(
            "--output" if command[3] == "train" else "--json") + 1]
        calls.append(verb)
        if verb == "train":
            os.makedirs(output, exist_ok=True)
            with h5py.File(os.path.join(output, "weights.hdf5"), "w") as f:
                f["w"] = np.arange(3.0)
            for name, value in (("options.json", {}), ("vocab.txt", {}), ("run.json", {
                    "tokens_per_step": 100.0, "supervised_predictions_per_step": 220.0})):
                with open(os.path.join(output, name), "w") as f:
                    json.dump(value, f)
        elif stop_evaluation[0]:
            raise KeyboardInterrupt  # the deadline
        else:
            with open(output, "w") as f:
                json.dump({"perplexity": 99.0}, f)
        return 2.0, 3.0

    monkeypatch.setattr(pretraining_value, "run", fake_run)
    monkeypatch.setattr(pretraining_value, "_recipe_file", lambda runs, name: "recipe.json")
    paths = {"lm_train": "train.txt", "lm_heldout": "heldout.txt"}
    report, saved = {}, []

    def save():
        saved.append(json.loads(json.dumps(report)))

    with pytest.raises(KeyboardInterrupt):
        pretraining_value.pretrain(paths, str(tmp_path), "elmo", 0, [1.0], 0.5, report, save)
    kept = tmp_path / "elmo" / "seed-0" / "budget-1"
    assert sorted(os.listdir(kept)) == ["options.json", "run.json", "vocab.txt", "weights.hdf5"]
    entry = saved[-1]["pretraining"]["elmo"]["0"]["1"]
    assert entry["steps"] == 120 and entry["heldout"] is None and entry["tokens_read"] == 12000
    assert entry["supervised_predictions"] == 26400  # what the run recorded, per step
    assert calls == ["train", "evaluate"]
    stop_evaluation[0] = False
    out = pretraining_value.pretrain(paths, str(tmp_path), "elmo", 0, [1.0], 0.5, report, save)
    assert calls == ["train", "evaluate", "evaluate"]  # not trained again
    assert out["1"]["heldout"] == {"perplexity": 99.0}
    assert out["1"]["train_wall_seconds"] == 2.0 and saved[-1]["pretraining"]["elmo"]["0"][
        "1"]["heldout"] == {"perplexity": 99.0}
    pretraining_value.pretrain(paths, str(tmp_path), "elmo", 0, [1.0], 0.5, report, save)
    assert len(calls) == 3  # done: nothing runs
    assert not (tmp_path / "elmo" / "seed-0" / "budget-1.partial").exists()
    # A larger budget in another report (a new --output) counts the run's earlier seconds too.
    out = pretraining_value.pretrain(paths, str(tmp_path), "elmo", 0, [2.0], 0.5, {},
                                     lambda: None)
    assert out["2"]["steps"] == 240
    assert (out["2"]["train_wall_seconds"], out["2"]["train_cpu_seconds"]) == (4.0, 6.0)
    # A ledger whose run was deleted describes nothing: a new run counts its own seconds.
    shutil.rmtree(tmp_path / "elmo" / "seed-0" / "run")
    out = pretraining_value.pretrain(paths, str(tmp_path), "elmo", 0, [3.0], 0.5, {},
                                     lambda: None)
    assert (out["3"]["steps"], out["3"]["train_wall_seconds"]) == (360, 2.0)


def test_the_trend_recovers_known_curves_and_where_one_reaches_the_other():
    from bench.pretraining_value import crossover, saturating_fit, shared_asymptote_fit, trend

    minutes = [7.5, 15, 30, 60]
    slow = {"asymptote": 95.0, "scale": 120.0, "exponent": 0.8}
    fast = {"asymptote": 92.0, "scale": 150.0, "exponent": 1.5}

    def curve(p, m):
        return p["asymptote"] - p["scale"] * m ** -p["exponent"]

    for truth in (slow, fast):
        fit = saturating_fit(minutes, [curve(truth, m) for m in minutes])
        assert fit["exponent"] == truth["exponent"]
        assert fit["asymptote"] == pytest.approx(truth["asymptote"], abs=1e-3)
        assert fit["rms"] < 1e-6
    # Where slow reaches fast, by bisection on the exact curves.
    lo, hi = 60.0, 6000.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if curve(slow, mid) < curve(fast, mid) else (lo, mid)
    assert crossover(slow, fast, 60, 6000) == pytest.approx(lo, rel=0.011)
    assert crossover({**slow, "asymptote": 91.0}, fast, 60, 6000) is None
    # One ceiling for both, recovered with each model's scale and exponent (on its grid, every
    # other one of the separate fits').
    shared = shared_asymptote_fit({
        "a": {m: curve({**slow, "asymptote": 93.0}, m) for m in minutes},
        "b": {m: curve({**fast, "asymptote": 93.0, "exponent": 1.6}, m) for m in minutes}})
    assert shared["asymptote"] == pytest.approx(93.0, abs=1e-3) and shared["rss"] < 1e-6
    assert (shared["fits"]["a"]["exponent"], shared["fits"]["b"]["exponent"]) == (0.8, 1.6)
    assert shared["fits"]["b"]["scale"] == pytest.approx(150.0, rel=1e-4)
    with pytest.raises(ValueError, match="3 or more budgets"):
        saturating_fit([7.5, 15], [80.0, 85.0])
    assert saturating_fit(minutes, [curve(slow, m) for m in minutes])["saturates"]
    # A straight rise in log-minutes has no asymptote (the fit runs to the grid's end), and a
    # falling score's "asymptote" is a floor.
    assert not saturating_fit(minutes, [80.0, 83.0, 86.0, 89.0])["saturates"]
    assert not saturating_fit(minutes, [90.0, 88.0, 87.0, 86.5])["saturates"]

    # From a report: the means over seeds (the fractions the probes record) at each budget.
    def probes(p, offset):
        return {seed: {f"{m:g}": {"frozen": {"wsj_pos_tagging": {
            "score": (curve(p, m) + sign * offset) / 100}}} for m in minutes}
            for seed, sign in (("0", 1), ("1", -1))}

    report = {"probes": {"elmo": probes(fast, 0.3), "masked_elmo": probes(slow, 0.5),
                         "masked_elmo_rate_15": {"0": {"7.5": {"frozen": {
                             "wsj_pos_tagging": {"score": 0.7}}}}}}}
    got = trend(report)["tasks"]
    assert set(got) == {"wsj_pos_tagging"}  # no other task was probed
    wsj = got["wsj_pos_tagging"]
    assert set(wsj["fits"]) == {"elmo", "masked_elmo"}  # one budget is not a trend
    assert wsj["fits"]["masked_elmo"]["asymptote"] == pytest.approx(95.0, abs=1e-3)
    assert wsj["crossover_minutes"]["masked_elmo"] == pytest.approx(lo, rel=0.011)
    assert set(wsj["leave_one_budget_out"]) == {"7.5", "15", "30", "60"}
    # The honest reading: on one shared ceiling the model behind, with the smaller exponent,
    # never reaches the other; the seeds' own curves (offset +-0.5 and +-0.3 from the truth)
    # cross near the means' point. Estimates that disagree: no crossover stated.
    verdict = wsj["verdict"]["masked_elmo"]
    assert verdict["gap_at"] == {f"{m:g}": pytest.approx(curve(fast, m) - curve(slow, m),
                                                         abs=0.01) for m in minutes}
    assert verdict["estimates"]["shared_asymptote"] is None
    assert verdict["estimates"]["separate_asymptotes"] == pytest.approx(lo, rel=0.011)
    assert set(verdict["estimates"]) == {"separate_asymptotes", "shared_asymptote", "seed_0",
                                         "seed_1"}
    assert all(verdict["estimates"][s] == pytest.approx(lo, rel=0.2) for s in ("seed_0",
                                                                              "seed_1"))
    assert verdict["crossover_minutes"] == "not determined"
    # A model already ahead at the largest budget: that budget, by every reading.
    report["probes"]["masked_elmo"] = probes({**slow, "asymptote": 99.0, "scale": 10.0}, 0)
    ahead = trend(report)["tasks"]["wsj_pos_tagging"]
    assert ahead["crossover_minutes"]["masked_elmo"] == 60
    assert ahead["verdict"]["masked_elmo"]["crossover_minutes"] == [60, 60]
    # One that rises in a straight line (no level in sight): undetermined, not a number.
    report["probes"]["masked_elmo"] = probes(slow, 0)
    for m, score in zip(minutes, (60.0, 65.0, 70.0, 75.0)):
        report["probes"]["masked_elmo"]["0"][f"{m:g}"]["frozen"]["wsj_pos_tagging"]["score"] = \
            report["probes"]["masked_elmo"]["1"][f"{m:g}"]["frozen"]["wsj_pos_tagging"][
                "score"] = score / 100
    assert trend(report)["tasks"]["wsj_pos_tagging"]["crossover_minutes"] == {
        "masked_elmo": "undetermined"}
    # ELMo probed at fewer budgets than the other: leaving one out leaves it no fit.
    del report["probes"]["elmo"]["0"]["60"], report["probes"]["elmo"]["1"]["60"]
    uneven = trend(report)["tasks"]["wsj_pos_tagging"]
    assert set(uneven["leave_one_budget_out"]["7.5"]["asymptotes"]) == {"masked_elmo"}
    assert uneven["leave_one_budget_out"]["7.5"]["crossover_minutes"] == {}


def test_probes_are_reported_on_test_unless_a_run_has_only_dev_and_never_mixed():
    from bench.pretraining_value import reported

    new = {"score": 0.80, "test": 0.78, "test_last_epoch": 0.77}
    old = {"score": 0.81}  # a run from before the test splits
    assert reported([new, dict(new, test=0.70)]) == ([0.78, 0.70], "test")
    assert reported([new, old]) == ([0.80, 0.81], "dev")


def test_a_model_no_reading_brings_to_the_reference_is_said_to_never_arrive():
    from bench.pretraining_value import trend

    minutes = [7.5, 15, 30, 60]

    def probes(asymptote, seeds=("0", "1")):
        return {seed: {f"{m:g}": {"frozen": {"uncertainty": {
            "score": (asymptote - 100 * m ** -1.0 + 0.1 * int(seed)) / 100,
            "test": (asymptote - 100 * m ** -1.0 + 0.1 * int(seed)) / 100}}} for m in minutes}
            for seed in seeds}

    report = {"probes": {"elmo": probes(75.0), "masked_elmo": probes(70.0)}}
    verdict = trend(report)["tasks"]["uncertainty"]["verdict"]["masked_elmo"]
    assert set(verdict["estimates"].values()) == {None}
    assert verdict["crossover_minutes"] == "none within 100x the largest budget"
    assert trend(report)["tasks"]["uncertainty"]["split"] == {"elmo": "test",
                                                              "masked_elmo": "test"}


def test_the_tuning_grid_searches_the_rate_then_the_schedule_at_the_best_one(monkeypatch):
    """The same search for each model: the three rates (the recipe's own rate is its own
    name's run), then warm-up and decay at the best rate; the point with the best mean dev
    score is chosen, and the table marks it."""
    monkeypatch.setattr(pretraining_value, "MODELS", dict(pretraining_value.MODELS))
    # Dev scores by (model, rate, schedule): ELMo best at 2e-3 and better with the schedule;
    # Masked ELMo best at 4e-3 and worse with it.
    dev = {("elmo", 1e-3, False): 0.70, ("elmo", 2e-3, False): 0.72,
           ("elmo", 4e-3, False): 0.71, ("elmo", 2e-3, True): 0.73,
           ("masked_elmo_cloze", 1e-3, False): 0.60, ("masked_elmo_cloze", 2e-3, False): 0.65,
           ("masked_elmo_cloze", 4e-3, False): 0.68, ("masked_elmo_cloze", 4e-3, True): 0.66}
    trained = []

    def settings(name):
        recipe = Recipe.from_dict(pretraining_value.MODELS[name])
        return (name.split("@")[0], recipe.learning_rate, recipe.decay_steps is not None)

    def fake_pretrain(paths, runs, name, seed, budgets, seconds, report, save, train_args):
        recipe = Recipe.from_dict(pretraining_value.MODELS[name])
        steps = round(budgets[0] * 60 / seconds)
        if recipe.decay_steps is not None:
            assert (recipe.warmup_steps, recipe.decay_steps) == (round(0.05 * steps), steps)
        trained.append(settings(name))
        report.setdefault("pretraining", {})[name] = {str(seed): {f"{budgets[0]:g}": {
            "steps": steps, "heldout": {"perplexity": 100.0}}}}

    def fake_probe(paths, runs, name, seed, budget, task, fine_tune, report):
        score = dev[settings(name)]
        return {"score": score, "test": score - 0.01}

    monkeypatch.setattr(pretraining_value, "pretrain", fake_pretrain)
    monkeypatch.setattr(pretraining_value, "probe", fake_probe)
    report = {"models": {}}
    calibration = {"elmo": {"seconds_per_step": 0.5},
                   "masked_elmo_cloze": {"seconds_per_step": 0.6}}
    grid = pretraining_value.tuning_grid({}, "runs", report, calibration, lambda: None, [])
    assert trained == [("elmo", 1e-3, False), ("elmo", 2e-3, False), ("elmo", 4e-3, False),
                       ("elmo", 2e-3, True), ("masked_elmo_cloze", 1e-3, False),
                       ("masked_elmo_cloze", 2e-3, False), ("masked_elmo_cloze", 4e-3, False),
                       ("masked_elmo_cloze", 4e-3, True)]
    assert grid["models"]["elmo"]["chosen"] == "elmo@lr=0.002,warmup_decay"
    assert grid["models"]["masked_elmo_cloze"]["chosen"] == "masked_elmo_cloze@lr=0.004"
    assert grid["models"]["elmo"]["steps"] == 1800
    assert "elmo" in grid["models"]["elmo"]["points"]  # the recipe's own rate: its own run
    assert report["models"]["elmo@lr=0.001"] == {"base": "elmo_cpu", "learning_rate": 1e-3}
    table = pretraining_value.grid_table(report)
    assert "| **masked_elmo_cloze@lr=0.004** | 1500 | 100.0 | 68.0 / 68.0 / 68.0 | 68.00 |" \
        in table
