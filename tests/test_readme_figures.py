"""README.md's headline table against the benchmark JSONs it cites: every row's figures are
recomputed here from `bench/results/` and must appear in the row as written, and every row is
checked (a new row needs its figures here)."""

import json
import pathlib
import re
import statistics

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _json(name):
    return json.loads((RESULTS / name).read_text())


def _table():
    """{first cell: second cell} of the table under README's `## Headline figures`."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows[1:]]  # no header
    return {row[0]: row[1] for row in cells if set(row[0]) - set("- ")}


def _sci(x):
    """7.152e-07 -> '7.2e-7', as the README writes it."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _thousands(x):
    return f"{x / 1000:.0f}k"


def _percent(x):
    return f"{100 * x:.1f}"


def _mean_over_seeds(report, model, budget, read):
    return statistics.mean(read(by_budget[budget])
                           for by_budget in report[model].values() if budget in by_budget)


def _probe_means(report, model, budget, variant="frozen",
                 tasks=("wsj_pos_tagging", "sentence_polarity", "uncertainty")):
    return " / ".join(_percent(_mean_over_seeds(
        report["probes"], model, budget, lambda entry, t=task: entry[variant][t]["test"]))
        for task in tasks)


def _expected():
    """{row's first cell (a prefix): (the JSON files it rests on, the strings it must hold)}."""
    parity = _json("parity-cpu.json")
    inference = _json("inference-cpu.json")["results"]["shapes"]["elmo_tf_fp32"]["64x40"]
    gpu = _json("gpu.json")
    value = _json("pretraining_value-cpu-issue38.json")
    baselines = value["baselines"]
    heldout = value["pretraining"]
    return {
        "parity with bilm-tf's outputs": (["parity-cpu.json"], [
            f"{_sci(parity['max_abs_difference'])} max abs"]),
        "CPU inference, `original`, 64 x 40": (["inference-cpu.json"], [
            f"{inference['tokens_per_second_median']:.0f} tokens/s",
            f"{100 * inference['fraction_of_gemm_real_tokens']:.0f} % of this CPU"]),
        "H100 inference": (["gpu.json"], [
            f"float32 (TF32 off) {_thousands(gpu['inference_summary']['float32_tf32_off'][3])}",
            f"bfloat16 {_thousands(gpu['inference_summary']['mixed_bfloat16'][3])}",
            f"float32: {_thousands(gpu['inference_summary']['allennlp_same_gpu_from_the_issue'][3])}"]),
        "H100 pre-training": (["gpu.json"], [
            f"{_thousands(gpu['training_summary']['mixed_bfloat16_tf32_on_xla'])} tokens/s"]),
        "ELMo (`elmo_cpu`)": (["pretraining_value-cpu-issue38.json"], [
            "held-out forward perplexity "
            f"{_mean_over_seeds(heldout, 'elmo', '60', lambda e: e['heldout']['forward_perplexity']):.1f}",
            f"5-gram {baselines['perplexity']['kneser_ney_5gram']['perplexity']:.1f}",
            f"unigram {baselines['perplexity']['unigram']['perplexity']:.1f}"]),
        "its frozen probes on **test** splits": (["pretraining_value-cpu-issue38.json"], [
            f"{_probe_means(value, 'elmo', '60')} %",
            "most-frequent-tag "
            f"{_percent(baselines['wsj_pos_tagging']['most_frequent_tag']['score'])}",
            "bag-of-words " + " / ".join(
                _percent(baselines[t]["bag_of_words_logistic_regression"]["score"])
                for t in ("sentence_polarity", "uncertainty"))]),
        "Masked ELMo (`masked_elmo_cpu`": (["pretraining_value-cpu-issue38.json"], [
            f"{_probe_means(value, 'masked_elmo_cloze', '60')} %",
            "masked-LM perplexity "
            f"{_mean_over_seeds(heldout, 'masked_elmo_cloze', '60', lambda e: e['heldout']['perplexity']):.1f}"]),
        "fine-tuned (the biLM trained too)": (["pretraining_value-cpu-issue38.json"], [
            f"ELMo {_probe_means(value, 'elmo', '60', 'fine_tuned', BAR_TASKS)} %",
            "Masked ELMo "
            f"{_probe_means(value, 'masked_elmo_cloze', '60', 'fine_tuned', BAR_TASKS)} %"]),
    }


# The tasks of issue 38's bar (Masked ELMo at least ELMo's at 60 CPU-minutes).
BAR_TASKS = ("wsj_pos_tagging", "uncertainty")


def _row(table, prefix):
    matches = [label for label in table if label.startswith(prefix)]
    assert len(matches) == 1, f"README's headline table: {len(matches)} rows start {prefix!r}"
    return matches[0]


@pytest.mark.parametrize("prefix", list(_expected()))
def test_headline_row_matches_its_json(prefix):
    files, figures = _expected()[prefix]
    table = _table()
    label = _row(table, prefix)
    for figure in figures:
        assert figure in table[label], (
            f"README row {label!r} should hold {figure!r} (from {files}); it says "
            f"{table[label]!r}")


def test_every_headline_row_is_checked():
    table = _table()
    checked = {_row(table, prefix) for prefix in _expected()}
    assert set(table) == checked, f"rows without a check here: {sorted(set(table) - checked)}"


@pytest.mark.parametrize("name", sorted({f for files, _ in _expected().values() for f in files}))
def test_headline_jsons_carry_their_provenance(name):
    report = _json(name)
    runs = [report] + list(report.get("runs_of_parts", {}).values())
    assert any(re.match(r"\d{4}-\d\d-\d\d", r.get("date", "")) for r in runs), name
    assert any(r.get("machine") for r in runs), name
    assert any(re.fullmatch(r"[0-9a-f]{40}", r.get("versions", {}).get("git_commit", ""))
               for r in runs), name
