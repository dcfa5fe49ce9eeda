"""The real-model study's report, piece by piece, on records written by hand: a cell over the
seeds finished so far, per-item scores averaged over seeds, validity, differences paired over
seeds and items, DPO's gains, the training and sweep rows, the curves; and the markdown that
says them (arrows, units, spreads, partial columns, counts, claims, the DPO and compute lines).

The whole chain on a tiny model is ``test_study_real``'s quick study; these pin the arithmetic
and the words that a whole run would not tell apart."""

import json
from dataclasses import replace

import pytest

import calyrex.research.study.report as report
from calyrex.eval.data import write_json
from calyrex.research.study import markdown as md
from calyrex.research.study.config import FULL, V1, Arm, Suite
from calyrex.research.study.report import Metric, collect
from conftest import finished_suite

TT = Suite("tensortrust", 2)
HOLDS = Metric("tensortrust", "hijacking_holds", "holds")
HRR = Metric("tensortrust", "HRR", "HRR", needs="hijacking_validity")
CFG = replace(
    V1,
    arms=(Arm("calyrex-late8th", "calyrex"), Arm("lora", "lora")),
    seeds=(0, 1, 2),
    suites=(TT,),
)


def evaluated(out, run, suite=TT, **metrics):
    finished_suite(out, run, suite, **metrics)


def with_items(monkeypatch, scores):
    """Per-item scores by run (``{run: {item: value}}``, one group); none for other runs."""

    def items(cfg, out, run, m):
        got = scores.get(run)
        return None if got is None else {k: ("g", float(v)) for k, v in got.items()}

    monkeypatch.setattr(report, "_items", items)


# --- a cell ---------------------------------------------------------------------------------------


def test_a_cell_holds_the_seeds_finished_in_order_up_to_the_first_missing(tmp_path):
    evaluated(tmp_path, "lora-s0", hijacking_holds=0.2, n=10)
    evaluated(tmp_path, "lora-s2", hijacking_holds=0.6, n=10)  # seed 1 not evaluated yet
    cell = report._cell(CFG, tmp_path, "lora", HOLDS)
    assert cell["per_seed"] == [0.2] and cell["value"] == 0.2 and cell["seeds_planned"] == 3


def test_a_first_seed_only_suite_is_its_first_seeds_value(tmp_path):
    once = Suite("tensortrust", 2, first_seed_only=True)
    for seed, v in enumerate((0.2, 0.4, 0.9)):
        evaluated(tmp_path, f"lora-s{seed}", once, hijacking_holds=v, n=10)
    cell = report._cell(replace(CFG, suites=(once,)), tmp_path, "lora", HOLDS)
    assert cell["per_seed"] == [0.2] and cell["seeds_planned"] == 1


def test_a_rate_over_valid_items_is_the_pooled_one_its_interval_is_of(tmp_path, monkeypatch):
    """Seed 0 rates 1 of its 2 valid defences, seed 1 its one valid defence: the seeds' mean
    0.75 is not the rate of the items pooled (a: 1, b: 0 → 0.5), which the interval is of."""
    evaluated(tmp_path, "lora-s0", HRR=0.5, hijacking_validity=0.5)
    evaluated(tmp_path, "lora-s1", HRR=1.0, hijacking_validity=0.25)
    with_items(monkeypatch, {"lora-s0": {"a": 1, "b": 0}, "lora-s1": {"a": 1}})
    cfg = replace(CFG, seeds=(0, 1))
    cell = report._cell(cfg, tmp_path, "lora", HRR)
    assert cell["per_seed"] == [0.5, 1.0] and cell["value"] == 0.5 and cell["n"] == 2
    assert cell["ci95"][0] <= 0.5 <= cell["ci95"][1]


def test_an_items_score_is_its_mean_over_the_seeds_that_scored_it(tmp_path, monkeypatch):
    evaluated(tmp_path, "lora-s0", hijacking_holds=0.5)
    evaluated(tmp_path, "lora-s1", hijacking_holds=0.5)
    with_items(monkeypatch, {"lora-s0": {"a": 1, "b": 0}, "lora-s1": {"a": 0, "b": 0, "c": 1}})
    cell = report._cell(replace(CFG, seeds=(0, 1)), tmp_path, "lora", HOLDS)
    assert cell["items"] == {"a": ("g", 0.5), "b": ("g", 0.0), "c": ("g", 1.0)}


def test_validity_is_the_seeds_mean_and_the_threshold_itself_is_defined():
    records = [{"metrics": {"HRR": 0.5, "hijacking_validity": v}} for v in (0.05, 0.2)]
    assert report.undefined(HRR, records) == ""  # mean 12.5 % ≥ 10 %
    at = [{"metrics": {"HRR": 0.5, "hijacking_validity": report.MIN_VALIDITY}}]
    assert report.undefined(HRR, at) == ""
    below = [{"metrics": {"HRR": 0.5, "hijacking_validity": 0.09}}]
    assert report.undefined(HRR, below) == "undefined: hijacking_validity 9 % < 10 %"


def test_lm_evals_own_standard_error_is_taken_where_it_reports_one():
    record = {"metrics": {"acc": 0.5, "acc_stderr": 0.123, "n": 10}}
    assert report._stderr(record, "acc") == 0.123


# --- differences ---------------------------------------------------------------------------------


def test_a_difference_pairs_the_seeds_both_arms_have_from_the_first():
    a = {"value": 2.0, "per_seed": [1.0, 2.0, 3.0], "se": 0.1}
    b = {"value": 15.0, "per_seed": [10.0, 20.0], "se": 0.1}
    diff = report._difference(CFG, a, b)
    assert diff["seed_spread"] == [-18.0, -9.0]  # 1 − 10 and 2 − 20


def seeded_cells(monkeypatch, values, se=0.01):
    """``report._cell`` giving each arm the per-seed ``values[label][seed]`` of the seeds its
    config asks for, as far as they are finished (a prefix), with a standard error."""

    def cell(cfg, out, label, m):
        if label not in values:
            return None
        got = values[label]
        seeds = (0,) if label == "base" else cfg.seeds_of(cfg.arm(label))
        per = [got[s] for s in seeds if s in got]
        if not per:
            return None
        return {"value": sum(per) / len(per), "per_seed": per, "se": se, "seeds_planned": 3}

    monkeypatch.setattr(report, "_cell", cell)
    monkeypatch.setattr(report, "metrics", lambda cfg: [HOLDS])


def test_calyrex_and_a_baseline_are_compared_over_the_seeds_both_have(tmp_path, monkeypatch):
    values = {"calyrex-late8th": {0: 0.5, 1: 0.7, 2: 0.9}, "lora": {0: 0.4, 1: 0.4}}
    seeded_cells(monkeypatch, values)
    row = collect(CFG, tmp_path)["tensortrust:hijacking_holds"]
    diff = row["differences"]["lora"]
    assert diff["value"] == pytest.approx(0.6 - 0.4)  # CALYREX over seeds 0, 1 only
    assert diff["seed_spread"] == pytest.approx([0.1, 0.3])


def test_calyrex_against_the_base_pairs_every_seed_with_the_one_base(tmp_path, monkeypatch):
    values = {"base": {0: 0.5}, "calyrex-late8th": {0: 0.4, 1: 0.6, 2: 0.9}}
    seeded_cells(monkeypatch, values)
    row = collect(CFG, tmp_path)["tensortrust:hijacking_holds"]
    assert row["vs_base"]["seed_spread"] == pytest.approx([-0.1, 0.4])


def test_a_dpo_gain_is_against_its_sft_start_on_its_own_seeds(tmp_path, monkeypatch):
    """calyrex-dpo trains seeds 1 and 2 from calyrex-late8th's seeds 1 and 2: its gain is over
    those, not over the SFT arm's first two seeds; the verdict names DPO and SFT."""
    values = {"calyrex-late8th": {0: 0.0, 1: 0.5, 2: 0.5}, "calyrex-dpo": {1: 0.9, 2: 0.9}}
    seeded_cells(monkeypatch, values)
    cfg = replace(FULL, suites=(TT,))
    gain = collect(cfg, tmp_path)["tensortrust:hijacking_holds"]["dpo_gain"]["calyrex-dpo"]
    assert gain["value"] == pytest.approx(0.4) and gain["verdict"] == "DPO better"
    values["calyrex-dpo"] = {1: 0.1, 2: 0.1}
    gain = collect(cfg, tmp_path)["tensortrust:hijacking_holds"]["dpo_gain"]["calyrex-dpo"]
    assert gain["verdict"] == "SFT better"


def test_a_metric_no_arm_has_is_not_a_row(tmp_path, monkeypatch):
    seeded_cells(monkeypatch, {})
    assert collect(CFG, tmp_path) == {}


# --- training, sweep and curves -----------------------------------------------------------------


def trained(out, run, seconds, steps, kept=100, rows=120, best=None, stopped=False, evals=()):
    """A finished run's summary (batch 10, ``kept`` rows of ``rows`` trained on) and its
    validation losses ``evals`` [(step, loss)] in its metrics log."""
    where = out / "train" / run
    where.mkdir(parents=True, exist_ok=True)
    summary = {
        "config": {"lr": 1e-3, "batch_size": 10, "placement": "late8th"},
        "trainable_params": {"lora": 200, "calyrex-late8th": 100}.get(run.split("-s")[0], 100),
        "steps": steps,
        "seconds": seconds,
        "train_loss": 1.0,
        "data": {"rows": rows, "kept": kept},
    }
    if best is not None:
        validation = {"best": {"step": best, "eval_loss": 2.0}, "stopped_early": stopped}
        summary["validation"] = validation
    write_json(where / "summary.json", summary)
    lines = [json.dumps({"step": s, "eval_loss": v}) for s, v in evals]
    (where / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    return where


def test_the_training_row_takes_seconds_per_step_per_run_and_epochs_over_the_rows_kept(tmp_path):
    trained(tmp_path, "lora-s0", seconds=100, steps=10, best=10, evals=[(5, 2.5), (10, 2.0)])
    trained(tmp_path, "lora-s1", seconds=300, steps=20, best=20, evals=[(10, 2.5), (20, 2.4)])
    trained(tmp_path, "calyrex-late8th-s0", seconds=50, steps=10)
    rows = report.training(CFG, tmp_path)
    lora = rows["lora"]
    assert lora["seconds_per_step"] == pytest.approx((10 + 15) / 2)  # not 200 s / 10 steps
    assert lora["epochs_mean"] == pytest.approx((10 * 10 / 100 + 20 * 10 / 100) / 2)
    assert lora["params_vs_calyrex"] == 2.0
    assert lora["last_fall"] == [0.5, 0.1]  # the loss before the last minus the last
    assert lora["capped"] == 2  # both ended on their best evaluation, patience never stopped


def test_a_run_patience_stopped_is_not_capped(tmp_path):
    trained(tmp_path, "lora-s0", 100, 10, best=10, stopped=True, evals=[(5, 2.5), (10, 2.0)])
    assert report.training(replace(CFG, seeds=(0,)), tmp_path)["lora"]["capped"] == 0


def test_a_run_trained_again_is_reported_by_its_first_run(tmp_path):
    where = trained(tmp_path, "lora-s0", seconds=100, steps=10)
    first = json.loads((where / "summary.json").read_text()) | {"seconds": 400, "steps": 40}
    write_json(where / "summary.previous.json", first)
    row = report.training(replace(CFG, seeds=(0,)), tmp_path)["lora"]
    assert (row["steps"], row["seconds_mean"]) == (40, 400)


def test_a_dpo_sweep_value_shows_its_rewards_at_its_last_evaluation(tmp_path):
    rewards = [{"step": 0, "rewards/margins": 0.0}, {"step": 9, "rewards/margins": 0.8}]
    where = tmp_path / "sweep" / report.SWEEP_RUN.format(key="lora-dpo", lr="0.001")
    where.mkdir(parents=True)
    write_json(where / "summary.json", {"validation": {"rewards": rewards}})
    chosen = {"lora-dpo": {"lr": 0.001, "val_loss": {"0.001": 0.4}}}
    write_json(tmp_path / "sweep" / "chosen.json", chosen)
    assert report.sweep(tmp_path)["lora-dpo"]["val_rewards"] == {"0.001": {"rewards/margins": 0.8}}


def test_a_run_still_training_is_not_plotted(tmp_path, monkeypatch):
    import calyrex.research.study.curves as curves

    trained(tmp_path, "lora-s0", 100, 10, best=10, evals=[(5, 2.5), (10, 2.0)])
    training = tmp_path / "train" / "lora-s1"  # a metrics log, no summary yet
    training.mkdir(parents=True)
    (training / "metrics.jsonl").write_text(json.dumps({"step": 5, "eval_loss": 3.0}) + "\n")
    seen = {}
    monkeypatch.setattr(curves, "plot_validation", lambda runs, path: seen.update(runs))
    report.curves(CFG, tmp_path)
    assert list(seen) == ["lora-s0"] and seen["lora-s0"]["losses"] == [(5, 2.5), (10, 2.0)]


# --- the markdown -------------------------------------------------------------------------------


def row(title, cells, higher=True, scale=100, **extra):
    return {"title": title, "higher_is_better": higher, "scale": scale, "cells": cells} | {
        "differences": {},
        **extra,
    }


def cell(value, lo, hi, per_seed=None, n=10, planned=1):
    per_seed = per_seed or [value]
    return {
        "value": value,
        "ci95": [lo, hi],
        "n": n,
        "per_seed": per_seed,
        "seeds_planned": planned,
    }


def test_the_results_table_gives_direction_unit_and_interval():
    rows = {
        "a:asr": row("attack success", {"lora": cell(0.25, 0.2, 0.3)}, higher=False),
        "a:lp": row("log P(grant) (nats)", {"lora": cell(-1.234, -1.5, -1.0)}, scale=1),
    }
    lines = md.results_table({"metrics": rows}, ["base", "lora"])
    assert lines[0] == "| metric | n | lora |"
    assert lines[2] == "| attack success ↓ | 10 | 25.0 [20.0, 30.0] |"
    assert lines[3] == "| log P(grant) (nats) ↑ | 10 | -1.23 [-1.50, -1.00] |"


def test_a_difference_shows_the_seeds_spread_only_where_the_seeds_differ():
    same = {"value": 0.1, "ci95": [0.05, 0.15], "seed_spread": [0.1, 0.1]}
    apart = same | {"seed_spread": [0.0, 0.2]}
    assert md.signed(same) == "+10.0 [+5.0, +15.0]"
    assert md.signed(apart) == "+10.0 [+5.0, +15.0; seeds +0.0…+20.0]"


def test_a_column_is_partial_only_while_a_seed_is_missing():
    done = {"a": row("a", {"lora": cell(0.1, 0, 1, [0.1, 0.2, 0.3], planned=3)})}
    assert md.seeds_in({"metrics": done}, ["lora"]) == ""


def test_a_baseline_without_a_difference_keeps_the_rows_columns():
    diff = {"value": 0.1, "ci95": [0.05, 0.15], "seed_spread": [0.1, 0.1], "verdict": "v"}
    rows = {
        "a": row("a", {}, differences={"lora": diff, "parallel_mlp": diff}),
        "b": row("b", {}, differences={"parallel_mlp": diff}),
    }
    lines = md.differences_table({"metrics": rows})
    assert lines[-1] == "| b | – |  | +10.0 [+5.0, +15.0] | v |"
    assert {line.count("|") for line in lines} == {6}


def verdicts(*said):
    return {f"m{i}": {"differences": {"lora": {"verdict": v}}} for i, v in enumerate(said)}


def test_verdicts_are_counted_as_wins_losses_and_unresolved():
    said = ("CALYREX better", "lora better", "lora better", "no difference resolved")
    assert md.verdict_counts({"metrics": verdicts(*said)}) == [
        "- CALYREX vs LoRA: better on 1, worse on 2, unresolved on 1 of 4 metrics "
        "(95 % paired intervals)."
    ]


def test_a_claim_with_wins_and_losses_is_mixed_and_prefixes_match_their_rows():
    keys = ["msj_hijack:asr@4", "msj_hijack:asr@16"]
    rows = {
        k: {"title": k, "cells": {}, "differences": {"lora": {"verdict": v}}}
        for k, v in zip(keys, ("CALYREX better", "lora better"), strict=True)
    }
    text = "\n".join(md.claims({"metrics": rows}))
    assert "resists many-shot hijacking*: mixed against LoRA (better on msj_hijack:asr@4; " in text
    assert "worse on msj_hijack:asr@16)" in text


def test_forgetting_counts_only_rows_equal_to_the_base_on_every_seed():
    def idle(spread):
        cells = {"base": {"value": 0.5}}
        vs = {"value": 0.0, "seed_spread": spread, "verdict": "no difference resolved"}
        return {"title": "t", "capability": "no system prompt", "cells": cells, "vs_base": vs}

    rows = {"a": idle([0, 0]), "b": idle([-0.1, 0.1])}
    assert "exactly the base's accuracy on 1 of 2 capability tasks" in md._forgetting(rows)


def test_runs_the_epoch_cap_stopped_are_named_in_the_training_words():
    training = {"lora": {"capped": 2, "seeds": 3}}
    words = md._training_words({"sweep": {"x": {}}, "training": training})[0]
    assert (
        "Still improving when the epoch cap stopped them" in words and "lora (2 of 3 runs)" in words
    )


def test_the_sweep_marks_the_chosen_value_in_bold():
    assert md._sweep_cell("0.001", 0.5, 0.001, {0.001}) == "**0.001: 0.5000**"
    assert md._sweep_cell("0.003", 0.6, 0.001, {0.001}) == "0.003†: 0.6000"


def test_a_dpo_runs_rewards_read_first_then_last():
    margins = {"rewards/margins": [0.0, 0.9], "rewards/accuracies": [0.5, 0.75]}
    lines = md.dpo_rewards({"training": {"lora-dpo": {"val_rewards": [margins]}}})
    assert (
        lines[0]
        == "- lora-dpo (run 1): validation reward margin 0.000 → 0.900, accuracy 50 % → 75 %"
    )


def test_the_pairs_all_row_counts_every_kind():
    m = {"rewards/accuracies": 1.0, "rewards/margins": 1.0, "rewards/chosen": 0.0}
    m |= {"rewards/rejected": -1.0}
    found = {"r": {"by_tag": {"x": m, "y": m}, "all": m, "n": {"x": 3, "y": 4}}}
    lines = md.rewards_by_tag_table({"rewards_by_tag": found})
    assert lines[-2].startswith("| r | all | 7 | 100 % |")


def test_the_compute_names_what_was_set_aside():
    hours = {"total": 10.0, "sweep": 1.0, "train": 5.0, "eval": 4.0}
    words = md.compute_words({"compute_h": hours, "set_aside_h": {"previous": 1.5}})
    assert words == (
        "compute recorded 10.0 h (sweeps 1.0, training 5.0, evaluation 4.0; 1.5 h of it in "
        "previous/, set aside)"
    )
