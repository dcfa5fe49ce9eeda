"""``calyrex study real``: the whole chain in its quick preset (every stage, a few examples) on a
tiny Llama with SmolLM2's tokenizer and template (on SmolLM2 itself with ``--slow``: 22 min on
an AVX2-only CPU), its resumption, its report's arithmetic, and the CLI's positional argument."""

import json
import math

import pytest

from calyrex.cli import main
from calyrex.research.study.config import FULL, QUICK, V1
from calyrex.research.study.markdown import render
from calyrex.research.study.real import runs
from calyrex.research.study.report import Metric, metrics, verdict
from conftest import finished_suite


def test_verdicts_follow_the_interval_and_the_direction():
    up, down = Metric("s", "m", "t"), Metric("s", "m", "t", higher_is_better=False)
    assert verdict(up, {"ci95": [0.01, 0.2]}, "lora") == "CALYREX better"
    assert verdict(up, {"ci95": [-0.2, -0.01]}, "lora") == "lora better"
    assert verdict(down, {"ci95": [0.01, 0.2]}, "lora") == "lora better"
    assert verdict(down, {"ci95": [-0.3, 0.1]}, "lora") == "no difference resolved"
    assert verdict(up, {"ci95": [math.nan, math.nan]}, "lora") == "no difference resolved"


def test_runs_put_the_papers_comparison_first_and_each_dpo_arm_right_after_its_start():
    order = [name for name, _, _ in runs(FULL)]
    assert order[:4] == ["base", "calyrex-late8th-s0", "lora-s0", "parallel_mlp-s0"]
    assert len(order) == len(set(order))
    for name, arm, seed in runs(FULL)[1:]:
        if arm.init_from:  # a DPO arm follows the SFT run whose adapter it starts from at once
            start = order.index(f"{arm.init_from}-s{seed}")  # (or another DPO arm from it)
            between = order[start + 1 : order.index(name)]
            assert all(FULL.arm(n.rsplit("-s", 1)[0]).init_from == arm.init_from for n in between)
    firsts = [order.index(f"{a}-s0") for a in ("calyrex-late8th", "lora", "parallel_mlp")]
    assert max(firsts) < min(order.index(n) for n in order if n.endswith("-s1"))
    sft = [n for n, arm, _ in runs(FULL)[1:] if not arm.init_from]
    main_arms = [n for n, arm, _ in runs(FULL)[1:] if arm.seeds is None and not arm.init_from]
    assert sft[: len(main_arms)] == main_arms, "every seed of the comparison before other arms"
    # DPO on seeds 1 and 2 (ParallelMLP's on 1): seed 0's SFT adapters are not kept
    dpo = [n for n, arm, _ in runs(FULL) if arm and arm.init_from]
    assert dpo == ["calyrex-dpo-s1", "lora-dpo-s1", "parallel_mlp-dpo-s1"] + [
        "calyrex-dpo-s2",
        "calyrex-rpo-s2",  # RPO once, from the SFT adapter calyrex-dpo-s2 starts from
        "lora-dpo-s2",
        "lora-rpo-s2",
    ]
    assert [n for n, arm, _ in runs(QUICK) if arm and arm.init_from][0] == "calyrex-dpo-s0"


def test_a_dpo_sweep_starts_from_its_first_seeds_sft_adapter(tmp_path, monkeypatch):
    import calyrex.research.study.train as study_train

    seen = []

    def train(cfg, arm, seed, data, where, **budget):  # records the seed, writes a summary
        seen.append(seed)
        where.mkdir(parents=True)
        best = {"validation": {"best": {"eval_loss": 1.5}}}
        (where / "summary.json").write_text(json.dumps(best))

    monkeypatch.setattr(study_train, "_train", train)
    dpo = study_train._sweep_loss(
        FULL, FULL.arm("calyrex-dpo"), "calyrex-dpo", 1e-4, 4, tmp_path, tmp_path
    )
    sft = study_train._sweep_loss(FULL, FULL.arm("lora"), "lora-sft", 1e-4, 4, tmp_path, tmp_path)
    assert seen == [1, 0] and dpo == sft == 1.5


def test_the_rpo_arm_trains_with_its_loss_at_the_dpo_sweeps_rate(tmp_path, monkeypatch):
    """calyrex-rpo's run gets its loss (DPO + the preferred replies' next-token loss) and the
    rate swept for CALYREX's DPO; a sweep run from it would train plain DPO's loss."""
    from pathlib import Path

    import calyrex.research.study.train as study_train
    import calyrex.training.run as training_run

    seen = []

    def train(cfg):  # what calyrex train was given
        seen.append(cfg)
        Path(cfg.out).mkdir(parents=True)
        best = {"validation": {"best": {"eval_loss": 1.5}}}
        (Path(cfg.out) / "summary.json").write_text(json.dumps(best))

    monkeypatch.setattr(training_run, "train", train)
    for seed in (1, 2):
        (tmp_path / "train" / f"calyrex-late8th-s{seed}" / "adapter").mkdir(parents=True)
    data = tmp_path / "data"
    rpo, dpo = FULL.arm("calyrex-rpo"), FULL.arm("calyrex-dpo")
    study_train._train(FULL, rpo, 2, data, tmp_path / "train" / "calyrex-rpo-s2", lr=3e-4)
    study_train._train(FULL, dpo, 2, data, tmp_path / "train" / "calyrex-dpo-s2", lr=3e-4)
    study_train._sweep_loss(FULL, rpo, "calyrex-dpo", 1e-4, 4, data, tmp_path)
    assert [c.loss_type for c in seen] == [["sigmoid", "sft"], ["sigmoid"], ["sigmoid"]]
    assert {c.init_adapter for c in seen[:2]} == {
        str(tmp_path / "train" / "calyrex-late8th-s2" / "adapter")
    }
    assert seen[2].init_adapter.endswith("calyrex-late8th-s1/adapter")  # the DPO sweep's seed
    (tmp_path / "sweep").mkdir(exist_ok=True)
    chosen = {"calyrex-dpo": {"lr": 3e-4, "grid": list(FULL.dpo_lr_grid), "extend": 2}}
    (tmp_path / "sweep" / "chosen.json").write_text(json.dumps(chosen))
    monkeypatch.setattr(study_train, "_val", lambda *a: tmp_path)
    assert study_train.chosen_lr(FULL, rpo, data, tmp_path) == 3e-4


@pytest.mark.parametrize(
    ("valley", "swept", "lr", "edge"),
    [
        (1e-3, [1e-4, 3e-4, 1e-3, 3e-3], 1e-3, False),  # inside the grid: no extension
        (1e-2, [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2], 1e-2, False),  # past the top: two more
        (1.0, [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2], 3e-2, True),  # still rising: said so
        (1e-5, [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3], 1e-5, True),  # the bottom: an edge still
    ],
)
def test_a_sweep_won_at_the_grid_edge_grows_past_it(valley, swept, lr, edge, tmp_path, monkeypatch):
    import calyrex.research.study.train as study_train

    tried = []

    def loss(cfg, arm, key, value, steps, data, out):  # a valley in log(lr) at ``valley``
        tried.append(value)
        return abs(math.log10(value / valley))

    monkeypatch.setattr(study_train, "_sweep_loss", loss)
    monkeypatch.setattr(study_train, "_val", lambda *a: tmp_path)
    (tmp_path / "sweep").mkdir()
    assert study_train.chosen_lr(FULL, FULL.arm("lora"), tmp_path, tmp_path) == pytest.approx(lr)
    chosen = json.loads((tmp_path / "sweep" / "chosen.json").read_text())["lora-sft"]
    assert chosen["swept"] == pytest.approx(swept) and chosen["at_grid_edge"] is edge
    assert sorted(tried) == pytest.approx(swept)  # each value trained once
    study_train.chosen_lr(FULL, FULL.arm("lora"), tmp_path, tmp_path)  # recorded: not swept again
    assert len(tried) == len(swept)


def test_a_grid_grows_in_its_own_steps():
    from calyrex.research.study.train import _past_edge

    assert _past_edge([1e-3, 3e-3], up=True) == 1e-2  # 1-3-10 keeps its pattern
    assert _past_edge([1e-4, 3e-4], up=False) == 3e-5
    assert _past_edge([1e-4, 1e-3], up=True) == 1e-2  # a 1-10 grid: another decade
    assert _past_edge([1e-4, 1e-3], up=False) == 1e-5
    assert _past_edge([1e-5, 1e-4, 1e-3], up=True) == 1e-2


def test_a_dpo_run_to_redo_brings_back_the_sft_adapter_it_starts_from(tmp_path):
    """Committed results keep no weights: a DPO run whose evaluation is unfinished and whose
    adapter is gone is trained again, so the SFT run it starts from is needed again too."""
    from calyrex.research.study.real import _adapter_needed

    sft, dpo = FULL.arm("parallel_mlp"), FULL.arm("parallel_mlp-dpo")
    for arm in (sft, dpo):
        (tmp_path / "train" / f"{arm.label}-s1").mkdir(parents=True)
        (tmp_path / "train" / f"{arm.label}-s1" / "summary.json").write_text("{}")
    for suite in FULL.suites:  # the SFT run is fully evaluated (a second seed), the DPO run not
        where = tmp_path / "eval" / "parallel_mlp-s1" / suite.key
        where.mkdir(parents=True)
        (where / f"{suite.name}.json").write_text(json.dumps({"status": "ok"}))
    assert _adapter_needed(FULL, tmp_path, dpo, 1)
    assert _adapter_needed(FULL, tmp_path, sft, 1)
    (tmp_path / "train" / "parallel_mlp-dpo-s1" / "adapter").mkdir()  # its adapter is here
    assert not _adapter_needed(FULL, tmp_path, sft, 1)
    for suite in FULL.suites:  # seed 0 evaluated: no DPO run starts from it, so it is not kept
        where = tmp_path / "eval" / "parallel_mlp-s0" / suite.key
        where.mkdir(parents=True)
        (where / f"{suite.name}.json").write_text(json.dumps({"status": "ok"}))
    assert not _adapter_needed(FULL, tmp_path, sft, 0)


def test_a_run_trained_again_for_its_adapter_keeps_the_first_runs_records(tmp_path):
    """The evaluated run's summary, curve, best step and precision stay beside the second run's
    (NAME.previous.EXT); the report's training figures and curve are the first run's, the
    compute holds both, and a third training keeps the first run's, not the second's."""
    from calyrex.research.study.markdown import trained_again_lines
    from calyrex.research.study.real import _forget_if_adapter_gone
    from calyrex.research.study.report import _first_summary, trained_again
    from calyrex.research.study.status import status

    where = tmp_path / "train" / "calyrex-late8th-s1"
    where.mkdir(parents=True)
    sft = FULL.arm("calyrex-late8th")
    _evaluated(tmp_path, "calyrex-late8th-s1", [s for s in FULL.suites if not s.first_seed_only])

    def finish(loss, step, seconds):
        best = {"step": step, "eval_loss": loss}
        summary = {"steps": 496, "seconds": seconds, "validation": {"best": best}}
        (where / "summary.json").write_text(json.dumps(summary))
        (where / "metrics.jsonl").write_text(json.dumps({"step": step, "eval_loss": loss}) + "\n")
        (where / "best.json").write_text(json.dumps(best))
        (where / "precision.json").write_text(json.dumps({"chosen": "fp32"}))

    finish(2.3643, 400, 3600.0)
    _forget_if_adapter_gone(FULL, tmp_path, sft, 1)
    assert sorted(p.name for p in where.iterdir()) == [
        "best.previous.json",
        "metrics.previous.jsonl",
        "precision.previous.json",
        "summary.previous.json",
    ]
    assert status(FULL, tmp_path)["runs"][4]["training"]["state"] == "not started"
    finish(2.3650, 300, 1800.0)
    (where / "adapter").mkdir()
    _forget_if_adapter_gone(FULL, tmp_path, sft, 1)  # its adapter is here: nothing moves
    assert (where / "summary.json").is_file()
    assert _first_summary(where)["seconds"] == 3600.0
    found = status(FULL, tmp_path)
    assert found["runs"][4]["training"]["first"]["val_loss"] == 2.3643
    assert found["hours"]["train"] == 1.5  # the first run and the second
    rows = trained_again(found)
    assert rows == [
        {"run": "calyrex-late8th-s1", "best_step": [400, 300], "val_loss": [2.3643, 2.365]}
        | {"seconds": [3600.0, 1800.0]}
    ]
    assert (
        "2.3643 at step 400 (the adapter evaluated) → 2.3650 at step 300"
        in (trained_again_lines({"trained_again": rows})[0])
    )
    (where / "adapter").rmdir()
    _forget_if_adapter_gone(
        FULL, tmp_path, sft, 1
    )  # lost again: the second run's records go, the first's stay
    assert not (where / "summary.json").exists() and not (where / "metrics.jsonl").exists()
    assert _first_summary(where)["validation"]["best"]["eval_loss"] == 2.3643


def _evaluated(out, run, suites):
    for suite in suites:
        finished_suite(out, run, suite)


def test_a_partly_evaluated_run_trained_again_is_evaluated_again_whole(tmp_path):
    """An adapter lost before its evaluation finished: its training records and the suites it
    did finish move to OUT/previous, so the run is trained and evaluated anew (one model's row
    from one adapter); a fully evaluated run trained again only for a later arm keeps both."""
    from calyrex.research.study.real import _forget_if_adapter_gone

    for run in ("calyrex-dpo-s1", "calyrex-late8th-s1"):
        (tmp_path / "train" / run).mkdir(parents=True)
        (tmp_path / "train" / run / "summary.json").write_text("{}")
    _evaluated(tmp_path, "calyrex-dpo-s1", FULL.suites[:2])
    _evaluated(tmp_path, "calyrex-late8th-s1", [s for s in FULL.suites if not s.first_seed_only])
    _forget_if_adapter_gone(FULL, tmp_path, FULL.arm("calyrex-dpo"), 1)
    _forget_if_adapter_gone(FULL, tmp_path, FULL.arm("calyrex-late8th"), 1)
    assert not (tmp_path / "eval" / "calyrex-dpo-s1").exists()
    assert not (tmp_path / "train" / "calyrex-dpo-s1").exists()
    aside = tmp_path / "previous"
    assert (aside / "train" / "calyrex-dpo-s1" / "summary.json").is_file()
    moved = aside / "eval" / "calyrex-dpo-s1" / FULL.suites[1].key
    assert (moved / f"{FULL.suites[1].name}.json").is_file()
    assert len(list((tmp_path / "eval" / "calyrex-late8th-s1").iterdir())) == 12
    assert (tmp_path / "train" / "calyrex-late8th-s1" / "summary.previous.json").is_file()


def test_cli_takes_the_study_as_a_positional_argument(capsys):
    with pytest.raises(SystemExit) as refused:  # the positional's choices, shown by --help
        main(["study", "nosuch", "--quick"])
    assert refused.value.code == 2
    assert "invalid choice: 'nosuch' (choose from 'real', 'ruleworld')" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_smollm2(smollm2_dir, tmp_path_factory):
    """A randomly initialised 8-layer Llama of 3 M parameters (its embedding, mostly) with
    SmolLM2's own tokenizer and chat template: the study's every stage at a fraction of the cost."""
    from transformers import AutoTokenizer

    from calyrex.backbones.tiny import tiny_model

    where = tmp_path_factory.mktemp("tiny-smollm2")
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    ids = {f"{k}_token_id": getattr(tok, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    tiny_model("llama", num_hidden_layers=8, vocab_size=len(tok), **ids).save_pretrained(where)
    tok.save_pretrained(where)
    return str(where)


@pytest.mark.usefixtures("real_data")
@pytest.mark.parametrize("model", ["tiny", pytest.param("smollm2", marks=pytest.mark.slow)])
def test_quick_study_runs_every_stage_and_resumes(model, tmp_path, request):
    out = tmp_path / "study"
    named = request.getfixturevalue("tiny_smollm2") if model == "tiny" else model
    command = ["study", "real", "--quick", "--model", named, "--out", str(out)]
    assert main(command) == 0
    report = json.loads((out / "report.json").read_text())
    arms = {a.label for a in QUICK.arms}
    assert set(report["training"]) == arms
    for label in ("lora", "parallel_mlp"):  # parameter-matched to late8th within 2 %
        assert abs(report["training"][label]["params_vs_calyrex"] - 1) <= 0.02
    suites = {m.suite for m in metrics(QUICK)}
    evaluated = {key.split(":")[0] for key in report["metrics"]}
    assert evaluated == suites, suites - evaluated
    for row in report["metrics"].values():
        assert {"base", "calyrex-late8th", "lora", "parallel_mlp"} <= set(row["cells"])
        for cell in (c for c in row["cells"].values() if "undefined" not in c):
            lo, hi = cell["ci95"]
            assert math.isnan(lo) or lo <= cell["value"] + 1e-9 <= hi + 2e-9
    assert "| metric | n |" in (out / "report.md").read_text()
    # issue 38: a validation split, a learning rate swept per method and objective, every run
    # trained against the split (its best adapter kept), the curves plotted
    assert (out / "data" / "sft.val.jsonl").is_file() and (
        out / "data" / "preference.val.jsonl"
    ).is_file()
    chosen = json.loads((out / "sweep" / "chosen.json").read_text())
    assert set(chosen) == {f"{a.method}-{a.objective}" for a in QUICK.arms}
    for sweep in chosen.values():
        assert set(sweep["grid"]) == set(sweep["swept"])  # QUICK grows no grid
        assert sweep["lr"] in sweep["swept"] and len(sweep["val_loss"]) == len(sweep["swept"])
        assert sweep["val_loss"][f"{sweep['lr']:g}"] == min(sweep["val_loss"].values())
    for label, row in report["training"].items():
        arm = QUICK.arm(label)
        assert row["lr"] == chosen[f"{arm.method}-{arm.objective}"]["lr"]
        assert row["best_steps"] and row["val_loss_mean"] > 0
    dpo_rows = [r for k, r in report["training"].items() if k.endswith("-dpo")]
    assert dpo_rows and all(r["val_rewards"] for r in dpo_rows)
    # the reference is the SFT model each DPO run starts from: its first validation margin is 0
    assert all(v["rewards/margins"][0] == 0.0 for r in dpo_rows for v in r["val_rewards"])
    assert all(v["rewards/chosen"][0] == 0.0 for r in dpo_rows for v in r["val_rewards"])
    # each DPO run's validation rewards by kind of pair; "all" is its kept adapter's own figures
    # (the same pairs, the same reference: the adapter it started from)
    dpo_runs = {run for run, arm, _ in runs(QUICK) if arm is not None and arm.objective == "dpo"}
    assert set(report["rewards_by_tag"]) == dpo_runs
    for run, found in report["rewards_by_tag"].items():
        summary = json.loads((out / "train" / run / "summary.json").read_text())["validation"]
        at_best = next(r for r in summary["rewards"] if r["step"] == summary["best"]["step"])
        assert found["all"]["loss"] == pytest.approx(summary["best"]["eval_loss"], rel=1e-5)
        for key in ("rewards/margins", "rewards/chosen"):
            assert found["all"][key] == pytest.approx(at_best[key], rel=1e-4, abs=1e-6)
        assert set(found["by_tag"]) == set(found["n"]) and len(found["n"]) >= 2
        # the balanced pairs repeat the right code's: each kind counts its distinct pairs
        val = (out / "data" / "preference.val.jsonl").read_text().splitlines()
        granted = [line for line in val if json.loads(line)["tag"] == "granted"]
        assert found["n"]["granted"] == len(set(granted)) == len(granted) / 2
        assert found["seconds"] > 0  # counted in the study's evaluation compute
    assert "DPO validation pairs by kind" in (out / "report.md").read_text()
    # each DPO sweep value's last validation rewards, read from its sweep run
    for key, s in report["sweep"].items():
        assert set(s.get("val_rewards", {})) == (set(s["val_loss"]) if "-dpo" in key else set())
    assert report["validation_plot"] == "validation.png" and (out / "validation.png").is_file()
    # the compute its records hold: every sweep run, training run and suite timed (in seconds:
    # a fast machine does the quick study's sweeps in under 18 s, 0.00 h)
    from calyrex.research.study.status import status

    spent = status(QUICK, out)
    assert min(spent["seconds"].values()) > 0
    hours = report["compute_h"]
    assert hours == spent["hours"]
    assert hours["total"] == pytest.approx(
        hours["sweep"] + hours["train"] + hours["eval"], abs=0.02
    )
    assert render(report, ["base", *sorted(arms)])
    # the held-out attack items, as --cases, on every model of QUICK (all seed 0), paired
    for run, _, _ in runs(QUICK):
        record = json.loads((out / "heldout" / run / "cases.json").read_text())
        assert record["label"] == run and record["n_cases"] >= 4 and record["seconds"] > 0
        assert record["groups"]["all"]["n"] + record["groups"]["all"]["skipped"] >= 2

    stamps = {p: p.stat().st_mtime_ns for p in (out / "train").rglob("*") if p.is_file()}
    stamps |= {p: p.stat().st_mtime_ns for p in (out / "eval").rglob("*.jsonl")}
    stamps |= {p: p.stat().st_mtime_ns for p in (out / "heldout").rglob("*")}
    assert main(command) == 0
    # resuming redoes nothing (how long a study takes is a benchmark's business, not a test's)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps, "a finished unit was redone"

    # rescoring scores the stored replies again: each record keeps what generating its replies
    # cost (seconds, this attempt's seconds, tokens), and the replies are not touched
    cost = ("seconds", "seconds_this_attempt", "tokens")
    files = [
        out / "eval" / r / s.key / f"{s.name}.json" for r, _, _ in runs(QUICK) for s in QUICK.suites
    ]
    before = {f: json.loads(f.read_text()) for f in files if f.is_file()}
    replies = {p: p.read_bytes() for p in (out / "eval").rglob("*.responses.jsonl")}
    assert main([*command, "--stages", "rescore"]) == 0
    assert {p: p.read_bytes() for p in replies} == replies and replies
    assert any("seconds_this_attempt" in record for record in before.values())
    for f, record in before.items():
        kept = {k: record[k] for k in cost if k in record}
        assert {k: json.loads(f.read_text()).get(k) for k in kept} == kept, f


def test_readme_study_block_is_generated_from_the_committed_report():
    """README.md and docs/study.md hold what scripts/readme_study.py writes from the report."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    check = [sys.executable, str(root / "scripts" / "readme_study.py"), "--check"]
    assert subprocess.run(check, cwd=root).returncode == 0, "run scripts/readme_study.py"


def test_an_accuracy_without_lm_evals_stderr_gets_lm_evals_formula():
    from calyrex.research.study.report import _stderr

    # ARC-Easy as lm-eval reported it on the base model (acc 0.475 of 40, stderr 0.07996…)
    reported = {"metrics": {"acc": 0.475, "acc_stderr": 0.07996393417804533, "n": 40}}
    group = {"metrics": {"acc": 0.475, "n": 40}}  # a group task (mmlu_local) reports none
    assert _stderr(group, "acc") == pytest.approx(_stderr(reported, "acc"), rel=1e-9)
    assert _stderr({"metrics": {"asr": 0.5, "n": 40}}, "asr") is None  # not an accuracy


def test_a_gain_minus_a_gain_is_paired_item_by_item():
    """DPO's gain for CALYREX minus LoRA's: (dpo − sft) − (dpo − sft) per item, then bootstrapped."""
    from calyrex.research.study.report import _difference, _minus

    def cell(scores):
        items = {f"i{k}": ("g", float(v)) for k, v in enumerate(scores)}
        return {
            "value": sum(scores) / len(scores),
            "per_seed": [sum(scores) / len(scores)],
            "items": items,
        }

    cal_gain = _minus(cell([1, 1, 1, 1]), cell([0, 0, 1, 1]))  # +0.5: items 0 and 1 learned
    lora_gain = _minus(cell([0, 0, 1, 1]), cell([0, 0, 1, 1]))  # nothing moved
    diff = _difference(QUICK, cal_gain, lora_gain)
    assert diff["value"] == pytest.approx(0.5) and diff["n"] == 4
    assert diff["ci95"][0] >= 0 and diff["ci95"][1] <= 1
    up = Metric("s", "m", "t")
    assert verdict(up, {"ci95": [0.01, 0.9]}, "lora") == "CALYREX better"
    no_items = _minus(
        {"value": 0.5, "per_seed": [0.5], "se": 0.03}, {"value": 0.4, "per_seed": [0.4], "se": 0.04}
    )
    assert no_items["se"] == pytest.approx(0.05) and "items" not in no_items
    # without items: value ± 1.96 se; with items: each item's gain is its own dpo − sft
    assert _difference(QUICK, no_items, {"value": 0.0, "per_seed": [0.0], "se": 0.0})[
        "ci95"
    ] == pytest.approx([0.1 - 1.959964 * 0.05, 0.1 + 1.959964 * 0.05])
    assert [v for _, v in cal_gain["items"].values()] == [1.0, 1.0, 0.0, 0.0]


def test_a_dpo_gain_pairs_each_dpo_seed_with_the_same_seed_of_its_sft_run(monkeypatch, tmp_path):
    import calyrex.research.study.report as report

    seen = []
    monkeypatch.setattr(
        report, "_cell", lambda cfg, out, label, m: seen.append(cfg.seeds_of(cfg.arm(label)))
    )
    m = Metric("s", "m", "t")
    report._over_seeds(FULL, tmp_path, "calyrex-late8th", m, 1, like=FULL.arm("calyrex-dpo"))
    report._over_seeds(FULL, tmp_path, "calyrex-late8th", m, 2, like=FULL.arm("calyrex-dpo"))
    report._over_seeds(FULL, tmp_path, "lora", m, 2)  # a baseline over the seeds CALYREX has
    assert seen == [(1,), (1, 2), (0, 1)]


def test_each_dpo_arm_has_its_own_gain_and_calyrex_vs_lora_takes_the_plain_dpo_arms(
    monkeypatch, tmp_path
):
    """calyrex-dpo and calyrex-rpo start from the same SFT arm: each gets its own gain over it,
    and "did DPO help CALYREX more than LoRA" compares calyrex-dpo's gain with lora-dpo's."""
    import calyrex.research.study.report as report

    value = {"base": 0.0, "calyrex-late8th": 1.0, "lora": 2.0, "parallel_mlp": 1.0}
    value |= {"calyrex-dpo": 4.0, "lora-dpo": 3.0, "calyrex-rpo": 11.0, "lora-rpo": 2.5}

    def cell(cfg, out, label, m):
        v = value.get(label)
        return None if v is None else {"value": v, "per_seed": [v], "se": 0.01}

    monkeypatch.setattr(report, "_cell", cell)
    row = next(iter(report.collect(FULL, tmp_path).values()))
    gains = {arm: g["value"] for arm, g in row["dpo_gain"].items()}
    assert gains == {"calyrex-dpo": 3.0, "lora-dpo": 1.0, "calyrex-rpo": 10.0, "lora-rpo": 0.5}
    assert row["dpo_calyrex_vs_lora"]["value"] == 2.0  # 3 - 1, not RPO's 10 - 1


def test_the_claims_are_worded_from_the_verdicts():
    from calyrex.research.study.markdown import claims, dpo_verdict

    def row(title, lora, pmlp, **extra):
        diffs = {"lora": {"verdict": lora}, "parallel_mlp": {"verdict": pmlp}}
        return {"title": title, "differences": diffs, **extra}

    def cap(title, ours, base, lora, vs_base="no difference resolved"):
        cells = {"base": {"value": base}, "calyrex-late8th": {"value": ours}}
        cells |= {"lora": {"value": lora}, "parallel_mlp": {"value": base}}
        spread = [ours - base, ours - base]
        vs = {"value": ours - base, "seed_spread": spread, "verdict": vs_base}
        where = title.split("(")[1].rstrip(")")  # the row's capability field, as report sets it
        return row(
            title,
            "no difference resolved",
            "no difference resolved",
            cells=cells,
            vs_base=vs,
            capability=where,
        )

    unresolved = "no difference resolved"
    report = {
        "metrics": {
            "sys_ifeval:a": row("IFEval a", "lora better", unresolved),
            "struq:asr": row("StruQ", "CALYREX better", "parallel_mlp better"),
            "msj_hijack:asr@4": row("MSJ 4", "CALYREX better", "CALYREX better"),
            "boolq:acc": cap("boolq acc (system prompt)", 0.3, 0.4, 0.4, "base better"),
            "boolq-nosys:acc": cap("boolq acc (no system prompt)", 0.4, 0.4, 0.35),
            # a task whose description is the system turn: the blocks act, it is not "idle"
            "mmlu-nosys:acc": cap("mmlu acc (task description)", 0.3, 0.35, 0.35),
        }
    }
    text = "\n".join(claims(report))
    assert "does not reproduce against LoRA (LoRA better on IFEval a)" in text
    assert "not resolved against ParallelMLP (1 rows" in text
    assert (
        "mixed against ParallelMLP" not in text
        and "reproduces against ParallelMLP (better on MSJ 4)" in text
    )
    assert "mixed against LoRA" not in text.split("StruQ")[0]
    assert (
        "exactly the base's accuracy on 1 of 1" in text
        and "LoRA's on 1, ParallelMLP's on 0" in text
    )
    assert "the base is better on boolq acc (system prompt)" in text
    assert dpo_verdict(report) == ""  # no DPO rows: nothing said
    report["metrics"]["struq:asr"]["dpo_calyrex_vs_lora"] = {"verdict": "CALYREX better"}
    assert (
        "better for CALYREX on: StruQ; better for LoRA on: none; no difference shown on 0 of 1"
        in dpo_verdict(report)
    )


def test_each_change_is_tabled_against_lora_and_against_calyrex_as_it_was():
    from calyrex.research.study.markdown import change_table, change_tables

    d = {"value": 0.1, "ci95": [0.05, 0.2], "seed_spread": [0.1, 0.1]}
    row = {"title": "StruQ", "differences": {}}
    row["change"] = {
        "calyrex-equal-time": {
            "lora": {**d, "verdict": "calyrex-equal-time better"},
            "calyrex-late8th": {**d, "verdict": "no difference resolved"},
        }
    }
    report = {"metrics": {"struq:asr": row, "sep:x": {"title": "SEP", "change": {}}}}
    lines = change_table(report, "calyrex-equal-time")
    assert (
        lines[2]
        == "| StruQ | +10.0 [+5.0, +20.0] | calyrex-equal-time better | +10.0 [+5.0, +20.0] | no difference resolved |"
    )
    assert len([x for x in lines if x.startswith("| ")]) == 2  # header and StruQ, not SEP
    assert lines[0].startswith("| metric | CALYREX at LoRA's time − lora | verdict |")
    assert "vs lora: better on 1, worse on 0, unresolved on 0 of 1" in lines[-2]
    assert "vs calyrex-late8th: better on 0, worse on 0, unresolved on 1 of 1" in lines[-1]
    assert change_table(report, "calyrex-fewer-granted") == []  # not run: nothing
    tables = change_tables(report)
    assert tables[0] == "### CALYREX at LoRA's time (`calyrex-equal-time`)"
    assert not any("fewer" in line for line in tables)
    assert change_tables({"metrics": {"sep:x": {"title": "SEP"}}}) == []


def test_tasks_that_describe_themselves_are_the_ones_with_a_description_yaml():
    """lm-eval's chat template renders a task's ``description`` as the system turn, so a
    capability run without a system prompt still has a span on those tasks (``DESCRIBED``)."""
    pytest.importorskip("lm_eval")
    from calyrex.eval.local_tasks import official
    from calyrex.research.study.config import CAPABILITY, DESCRIBED

    yamls = {
        "arc_easy": "arc/arc_easy.yaml",
        "arc_challenge": "arc/arc_challenge.yaml",
        "hellaswag": "hellaswag/hellaswag.yaml",
        "piqa": "piqa/piqa.yaml",
        "boolq": "super_glue/boolq/default.yaml",
        "mmlu_local": "mmlu/default/mmlu_anatomy.yaml",
    }
    assert set(yamls) == set(CAPABILITY)
    described = {task for task, yaml in yamls.items() if official(yaml).get("description")}
    assert described == set(DESCRIBED)
    titles = {m.suite: m.title for m in metrics(FULL) if m.capability}
    assert titles["mmlu_local-nosys"] == "mmlu_local acc (task description)"
    assert titles["boolq-nosys"] == "boolq acc (no system prompt)"


def test_calyrex_is_compared_with_lora_at_equal_steps_and_at_equal_time():
    from calyrex.research.study.markdown import differences_table, verdict_counts

    d = {"value": -0.1, "ci95": [-0.2, -0.05], "seed_spread": [-0.1, -0.1]}
    diffs = {"lora": {**d, "verdict": "lora better"}}
    report = {"metrics": {"sep:x": {"title": "SEP", "differences": diffs}}}
    assert differences_table(report)[0] == "| metric | CALYREX − LoRA | verdict |"
    diffs["lora-equal-time"] = {**d, "verdict": "no difference resolved"}
    lines = differences_table(report)
    assert lines[0] == (
        "| metric | CALYREX − LoRA | verdict | CALYREX − LoRA at equal time | verdict |"
    )
    assert lines[2] == (
        "| SEP | -10.0 [-20.0, -5.0] | lora better | -10.0 [-20.0, -5.0] | no difference resolved |"
    )
    said = verdict_counts(report)
    assert said[0].startswith("- CALYREX vs LoRA: better on 0, worse on 1")
    assert said[1].startswith("- CALYREX vs LoRA at equal time: better on 0, worse on 0")


def test_an_arm_names_the_mix_it_trains_on():
    from calyrex.research.study.config import V1

    assert FULL.arm("calyrex-late8th").data == "sft.jsonl"
    assert FULL.arm("calyrex-dpo").data == "preference.jsonl"
    assert V1.arm("calyrex-fewer-granted").data == "sft-fewer-granted.jsonl"
    order = [name for name, _, _ in runs(V1)]
    assert order[-4:-2] == ["calyrex-fewer-granted-s0", "lora-fewer-granted-s0"]
    assert order[-2:] == ["calyrex-fewer-granted-s1", "lora-fewer-granted-s1"]  # a second seed
    assert all(name.endswith("-s0") for name, _, _ in runs(QUICK)[1:])  # --quick: one seed
    assert V1.arm("lora-fewer-granted").data == "sft-fewer-granted.jsonl"
    # the trained study: the main comparison on 3 seeds, DPO (2 seeds for CALYREX and LoRA,
    # ParallelMLP's one) among them, then the other placement
    order = [name for name, _, _ in runs(FULL)]
    assert order[1:4] == ["calyrex-late8th-s0", "lora-s0", "parallel_mlp-s0"]
    assert order[-1] == "calyrex-analyze-s0" and len(order) == 1 + 9 + 5 + 1 + 2  # + RPO


def test_first_seed_only_rows_do_not_count_as_unfinished_seeds():
    from calyrex.research.study.markdown import seeds_in

    def row(per_seed, planned):
        return {"cells": {"lora": {"per_seed": per_seed, "seeds_planned": planned}}}

    done = {"a": row([0.1, 0.2, 0.3], 3), "a-nosys": row([0.1], 1)}
    assert seeds_in({"metrics": done}, ["lora"]) == ""
    partial = {**done, "b": row([0.1, 0.2], 3)}
    assert (
        seeds_in({"metrics": partial}, ["lora"])
        == "Seeds finished so far (mean over them): lora 2–3 of 3."
    )


def test_the_report_gives_no_verdict_or_claim_from_an_undefined_metric(tmp_path):
    """A model that (almost) never grants the right code has no robustness to compare: its
    cells read "undefined", no difference is computed from them, and the claim says so."""
    from dataclasses import replace

    from calyrex.research.study.config import V1, Arm, Suite
    from calyrex.research.study.markdown import claims, results_table
    from calyrex.research.study.report import collect

    cfg = replace(
        V1,
        arms=(Arm("calyrex-late8th", "calyrex"), Arm("lora", "lora")),
        seeds=(0,),
        suites=(Suite("tensortrust", 2), Suite("sep", 2)),
    )
    records = {  # (validity, HRR over valid defences, old rate, holds)
        "base": (0.0, None, 1.0, 0.0),
        "calyrex-late8th-s0": (0.05, 1.0, 0.95, 0.05),  # plays too rarely to judge
        "lora-s0": (0.8, 0.5, 0.6, 0.4),
    }
    for run, (valid, hrr, old, holds) in records.items():
        metrics = {"hijacking_validity": valid, "HRR": hrr, "HRR_all": old}
        finished_suite(tmp_path, run, cfg.suites[0], **metrics, hijacking_holds=holds)
    sep = {  # (probe executed in the instruction, separation over the rows executed there)
        "calyrex-late8th-s0": (0.06, 1.0),  # SEP's own rule rates 12 rows; the study's does not
        "lora-s0": (0.14, 0.87),
    }
    for run, (system, separation) in sep.items():
        metrics = {"probe_executed_system": system, "separation": separation}
        finished_suite(tmp_path, run, cfg.suites[1], **metrics)
    table = collect(cfg, tmp_path)
    separation = table["sep:separation"]["cells"]
    assert "probe_executed_system 6 % < 10 %" in separation["calyrex-late8th"]["undefined"]
    assert separation["lora"]["value"] == 0.87 and not table["sep:separation"]["differences"]
    hrr = table["tensortrust:HRR"]
    assert hrr["cells"]["base"]["undefined"] == "undefined: nothing to rate"
    assert "hijacking_validity 5 % < 10 %" in hrr["cells"]["calyrex-late8th"]["undefined"]
    assert hrr["cells"]["lora"]["value"] == 0.5 and not hrr["differences"]
    assert not table["tensortrust:HRR_all"]["differences"]  # the old rate: shown, never judged
    assert "lora" in table["tensortrust:hijacking_holds"]["differences"]  # the joint row is
    text = "\n".join(claims({"metrics": table}))
    assert "undecidable against LoRA on Tensor Trust hijacking robustness (valid defences)" in text
    assert "ParallelMLP" not in text  # no arm of this study: no claim is made against it
    assert "robustness (valid defences) ↑ | – | undefined | undefined | 50.0" in "\n".join(
        results_table({"metrics": table}, ["base", "calyrex-late8th", "lora"])
    )


def test_the_trained_study_asks_its_own_held_out_access_dialogues(tmp_path):
    from calyrex.research.study.data import eval_data

    assert FULL.val_rows and FULL.suite("mix_access").limit is None
    assert eval_data(tmp_path)["mix_access"] == str(tmp_path / "data" / "sft.val.jsonl")


def test_a_changed_recipe_is_refused_only_where_it_was_trained(tmp_path):
    """The runs' budget may change while only the learning-rate sweeps exist; the sweeps'
    recipe may not, and nothing may once a run was trained."""
    from dataclasses import replace

    from calyrex.research.study.real import _jsonable, run_study

    def recorded(cfg):  # what a study's first stage writes
        (tmp_path / "study.json").write_text(json.dumps({"config": _jsonable(cfg)}))

    recorded(FULL)
    (tmp_path / "sweep").mkdir()
    run_study(replace(FULL, patience=5, eval_steps=10), tmp_path, stages=())
    with pytest.raises(ValueError, match="other lr_grid"):
        run_study(replace(FULL, lr_grid=(1e-3, 1e-2)), tmp_path, stages=())
    (tmp_path / "train").mkdir()
    with pytest.raises(ValueError, match="other eval_steps, patience"):
        run_study(replace(FULL, patience=5, eval_steps=10), tmp_path, stages=())


def test_dpos_recipe_may_change_until_a_dpo_sweep_or_run_exists(tmp_path):
    """SFT runs trained do not fix DPO's recipe (no DPO run has read it); the first DPO sweep
    or DPO run does, and an SFT field stays fixed by the SFT runs."""
    from dataclasses import replace

    from calyrex.research.study.real import _jsonable, run_study

    (tmp_path / "study.json").write_text(json.dumps({"config": _jsonable(FULL)}))
    (tmp_path / "sweep" / "calyrex-sft-lr0.001").mkdir(parents=True)
    (tmp_path / "train" / "calyrex-late8th-s0").mkdir(parents=True)
    fewer = replace(FULL, dpo_lr_grid=(3e-5, 1e-4), dpo_beta=0.2)
    run_study(fewer, tmp_path, stages=())  # allowed
    (tmp_path / "study.json").write_text(json.dumps({"config": _jsonable(fewer)}))  # its record
    with pytest.raises(ValueError, match="other lr_grid"):
        run_study(replace(fewer, lr_grid=(1e-3,)), tmp_path, stages=())
    for made in ("sweep/calyrex-dpo-lr3e-05", "train/calyrex-dpo-s1"):
        (tmp_path / made).mkdir()
        with pytest.raises(ValueError, match="other dpo_beta, dpo_lr_grid"):
            run_study(FULL, tmp_path, stages=())
        (tmp_path / made).rmdir()


def test_the_compute_is_the_records_and_an_older_report_keeps_its_timers():
    from calyrex.research.study.markdown import compute_words

    hours = {"sweep": 5.84, "train": 5.85, "eval": 4.1, "total": 15.79}
    report = {"compute_h": hours, "wall_s": {"eval": 3000.0, "train": 600.0}}
    assert compute_words(report) == (
        "compute recorded 15.8 h (sweeps 5.8, training 5.8, evaluation 4.1)"
    )
    assert compute_words({"wall_s": {"eval": 3000.0, "train": 600.0}}) == (
        "wall time recorded 60 min"
    )
    aside = report | {"set_aside_h": {"superseded/dpo-unbalanced": 3.24}}
    assert compute_words(aside) == (
        "compute recorded 15.8 h (sweeps 5.8, training 5.8, evaluation 4.1; "
        "3.2 h of it in superseded/dpo-unbalanced/, set aside)"
    )


def test_the_sweep_table_orders_values_and_marks_the_grown_ones():
    from calyrex.research.study.markdown import sweep_table

    sweep = {
        "calyrex-sft": {
            "lr": 0.003,
            "grid": [0.001, 0.003],
            "swept": [0.0003, 0.001, 0.003],
            "steps": 80,
            "val_loss": {"0.001": 2.4, "0.003": 2.3, "0.0003": 2.5},
            "at_grid_edge": False,
        }
    }
    lines = sweep_table({"sweep": sweep})
    assert "| 0.0003†: 2.5000, 0.001: 2.4000, **0.003: 2.3000** | 0.003 |" in lines[2]
    assert any(line.startswith("† grown past") for line in lines)
    assert not any("chosen reward" in line for line in lines)  # SFT sweeps have no rewards
    # a DPO sweep: each value's validation rewards, in the order of the values
    dpo = {"lr": 1e-4, "grid": [3e-5, 1e-4], "swept": [3e-5, 1e-4], "steps": 40}
    dpo |= {"val_loss": {"0.0001": 0.575, "3e-05": 0.653}, "at_grid_edge": True}
    reward = {"rewards/margins": 0.321, "rewards/accuracies": 0.7885, "rewards/chosen": -0.041}
    dpo["val_rewards"] = {"0.0001": reward, "3e-05": reward | {"rewards/chosen": 0.004}}
    lines = sweep_table({"sweep": {"calyrex-dpo": dpo}})
    assert (
        "- calyrex-dpo, validation reward margin / accuracy / chosen reward: "
        "3e-05: 0.321 / 79 % / +0.004; 0.0001: 0.321 / 79 % / -0.041"
    ) in lines


def test_many_shot_right_codes_are_tensortrusts_and_are_not_computed_twice(tmp_path):
    """The many-shot suite's right-code prompt of a sample is Tensor Trust's hijacking right-code
    prompt word for word; the study takes that reply (and its grant log-probability) from the
    run's Tensor Trust rows before the suite runs, so the suite does not generate it again."""
    from pathlib import Path

    from calyrex.eval.bench import Context, EvalConfig
    from calyrex.eval.data import append_row, read_rows
    from calyrex.eval.runner import make_benchmark
    from calyrex.research.study.evaluate import share_right_codes

    data = Path(__file__).parent / "fixtures" / "eval" / "tensortrust"
    config = EvalConfig(data={"msj_hijack": str(data), "tensortrust": str(data)}, shots=[1])
    tt, msj = make_benchmark("tensortrust"), make_benchmark("msj_hijack")
    where = tmp_path / "eval" / "lora-s1"
    tt_items = tt.load(str(data), Context(config, tmp_path))
    codes = {it["id"]: it for it in tt_items if it["id"].startswith("hijacking:")}
    codes = {k: v for k, v in codes.items() if k.endswith(":access")}
    msj_items = msj.load(str(data), Context(config, tmp_path))
    asked = [it for it in msj_items if it.get("access")]
    assert len(asked) == 2
    for item in asked:  # the precondition: the very same conversation
        same = codes[f"hijacking:{item['sample_id']}:access"]
        assert msj.conversation(item, None) == tt.conversation(same, None)
    first = asked[0]
    (where / "tensortrust").mkdir(parents=True)
    row = {"id": f"hijacking:{first['sample_id']}:access", "response": "Access Granted"}
    row |= {"logprobs": {"grant": -0.25}, "target_tokens": {"grant": 3}}
    append_row(where / "tensortrust" / "tensortrust.responses.jsonl", row)
    suite = FULL.suite("msj_hijack")
    assert share_right_codes(FULL, tmp_path, "lora-s1", config) == 1
    rows = read_rows(where / suite.key / "msj_hijack.responses.jsonl")
    assert rows == [
        {"id": first["id"], "response": "Access Granted", "logprobs": {"grant": -0.25}}
        | {"target_tokens": {"grant": 3}, "borrowed_from": "tensortrust"}
    ]
    # run again: nothing is taken twice; the second sample (no Tensor Trust row) is left to run
    assert share_right_codes(FULL, tmp_path, "lora-s1", config) == 0


def test_status_reads_where_the_study_stands_and_writes_nothing(tmp_path, capsys):
    """--stages status: each model's training (finished / resumable from a checkpoint / not
    started) and evaluation, the sweeps and the hours spent, from the folder alone."""
    from calyrex.research.study.real import run_study

    with pytest.raises(ValueError, match="no study in"):
        run_study(FULL, tmp_path, ("status",))
    (tmp_path / "study.json").write_text("{}")
    done = tmp_path / "train" / "calyrex-late8th-s0"
    done.mkdir(parents=True)
    best = {"step": 300, "eval_loss": 2.25, "dir": "best-300"}
    summary = {"steps": 496, "seconds": 7200.0, "validation": {"best": best}}
    (done / "summary.json").write_text(json.dumps(summary))
    for step in (20, 100):  # the latest by step, not by name
        point = tmp_path / "train" / "lora-s0" / f"checkpoint-{step}"
        point.mkdir(parents=True)
        state = {"global_step": step, "max_steps": 496}
        (point / "trainer_state.json").write_text(json.dumps(state))
    sweep = tmp_path / "sweep" / "calyrex-sft-lr0.001"
    sweep.mkdir(parents=True)
    (sweep / "summary.json").write_text(json.dumps({"seconds": 1800.0}))
    for suite in FULL.suites[:3]:
        where = tmp_path / "eval" / "base" / suite.key
        where.mkdir(parents=True)
        record = {"status": "ok", "seconds": 600.0}
        (where / f"{suite.name}.json").write_text(json.dumps(record))
    (tmp_path / "heldout" / "base").mkdir(parents=True)
    # evaluation beside the suites counts too: the held-out items, a DPO run's rewards by kind
    (tmp_path / "heldout" / "base" / "cases.json").write_text(json.dumps({"seconds": 900.0}))
    (tmp_path / "train" / "calyrex-dpo-s1").mkdir(parents=True)
    kinds = tmp_path / "train" / "calyrex-dpo-s1" / "rewards_by_tag.json"
    kinds.write_text(json.dumps({"seconds": 900.0}))
    # runs set aside whole (a recipe replaced mid-study; a lost adapter's run made anew) still
    # cost what they cost
    lost = tmp_path / "previous" / "train" / "lora-s1" / "summary.json"
    lost.parent.mkdir(parents=True)
    lost.write_text(json.dumps({"seconds": 1800.0}))
    aside = tmp_path / "superseded" / "dpo-unbalanced"
    for part, name, record in (
        ("sweep", "calyrex-dpo-lr0.001/summary.json", {"seconds": 1800.0}),
        ("train", "calyrex-dpo-s1/summary.json", {"seconds": 3600.0}),
        ("train", "calyrex-dpo-s1/rewards_by_tag.json", {"seconds": 900.0}),
        (
            "eval",
            "calyrex-dpo-s1/tensortrust/tensortrust.json",
            {"status": "ok", "seconds": 900.0},
        ),
        ("heldout", "calyrex-dpo-s1/cases.json", {"seconds": 1800.0}),
    ):
        (aside / part / name).parent.mkdir(parents=True, exist_ok=True)
        (aside / part / name).write_text(json.dumps(record))
    before = sorted(p for p in tmp_path.rglob("*"))
    found = run_study(FULL, tmp_path, ("status",))
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written
    rows = {r["run"]: r for r in found["runs"]}
    assert [r["run"] for r in found["runs"]] == [name for name, _, _ in runs(FULL)]
    assert rows["base"]["evaluated"] == 3 and rows["base"]["suites"] == len(FULL.suites)
    assert rows["calyrex-late8th-s0"]["training"]["state"] == "finished"
    assert rows["lora-s0"]["training"] == {"state": "interrupted", "step": 100, "of": 496}
    assert rows["parallel_mlp-s0"]["training"] == {"state": "not started"}
    assert found["hours"] == {"sweep": 1.0, "train": 3.5, "eval": 2.0, "total": 6.5}
    assert found["set_aside_h"] == {"previous": 0.5, "superseded/dpo-unbalanced": 2.5}
    text = capsys.readouterr().out
    assert "| calyrex-late8th-s0 | finished: 496 steps, best step 300 (val 2.2500), 2.00 h" in text
    assert "| lora-s0 | resumes from step 100 of 496 |" in text
    assert rows["base"]["heldout"] is True and rows["lora-s0"]["heldout"] is None
    assert rows["lora-s1"]["heldout"] is False
    assert "| base | — | 3 of 18 suites, 0.75 h; held-out items done |" in text
    assert "| lora-s1 | not started | 0 of 12 suites; held-out items due |" in text
    assert "compute spent: sweep 1.0 h, train 3.5 h, eval 2.0 h, total 6.5 h" in text
    assert "of which set aside: previous/ 0.5 h, superseded/dpo-unbalanced/ 2.5 h" in text
    with pytest.raises(ValueError, match="give it alone"):
        run_study(FULL, tmp_path, ("status", "eval"))


def test_status_estimates_what_is_left_from_the_finished_records(tmp_path):
    """--stages status's estimate of the hours left: each pending sweep value, training run,
    suite, held-out items and rewards by kind at the median seconds of the finished ones of its
    kind (a method's runs, else its objective's; the rest of an interrupted run)."""
    from calyrex.research.study.status import lines, status

    def put(path: str, record: dict) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(json.dumps(record))

    best = {"validation": {"best": {"step": 1, "eval_loss": 2.0}}}
    put("train/calyrex-late8th-s0/summary.json", {"steps": 9, "seconds": 7200.0, **best})
    put("train/calyrex-late8th-s1/summary.json", {"steps": 9, "seconds": 3600.0, **best})
    put("train/calyrex-late8th-s1/summary.previous.json", {"steps": 9, "seconds": 1800.0, **best})
    put("train/calyrex-dpo-s1/summary.json", {"steps": 9, "seconds": 1800.0, **best})
    put("train/calyrex-dpo-s1/rewards_by_tag.json", {"seconds": 300.0})
    put("train/lora-s0/checkpoint-124/trainer_state.json", {"global_step": 124, "max_steps": 496})
    put("sweep/calyrex-dpo-lr3e-05/summary.json", {"seconds": 600.0})
    put("sweep/lora-dpo-lr3e-05/summary.json", {"seconds": 1200.0})
    chosen = {k: {"lr": 1e-3} for k in ("calyrex-sft", "lora-sft", "parallel_mlp-sft")}
    put("sweep/chosen.json", chosen | {"calyrex-dpo": {"lr": 3e-4}})
    for suite in FULL.suites:
        put(f"eval/base/{suite.key}/{suite.name}.json", {"status": "ok", "seconds": 100.0})
    put("heldout/base/cases.json", {"seconds": 900.0})
    found = status(FULL, tmp_path)["left"]
    # sweep: lora-dpo's two values left at the DPO values' median (900 s); parallel_mlp-dpo's
    # three likewise. train: calyrex's median 3,600 s (its runs: 7,200, 3,600 and the first
    # 1,800) for every SFT run left (lora and ParallelMLP have none: SFT's median), three
    # quarters of it for lora-s0 (at step 124 of 496), DPO's 1,800 for its six runs left (the
    # two RPO runs among them: no sweep of their own). eval: 100 s a suite (9 runs due 18, the
    # one-seed RPO arms among them; 8 runs due 12), 900 s the held-out items of 9 runs, 300 s
    # rewards by kind of 6 DPO runs.
    sweep = (2 + 3) * 900
    train = 0.75 * 3600 + 7 * 3600 + 6 * 1800
    evaluate = (9 * 18 + 8 * 12) * 100 + 9 * 900 + 6 * 300
    assert found["hours"] == {
        "sweep": round(sweep / 3600, 2),
        "train": round(train / 3600, 2),
        "eval": round(evaluate / 3600, 2),
        "total": round((sweep + train + evaluate) / 3600, 2),
    }
    assert found["unknown"] == []
    # with no DPO record at all, the DPO work has nothing to go by, and says so
    for gone in ("train/calyrex-dpo-s1", "sweep/calyrex-dpo-lr3e-05", "sweep/lora-dpo-lr3e-05"):
        for f in (tmp_path / gone).iterdir():
            f.unlink()
        (tmp_path / gone).rmdir()
    found = status(FULL, tmp_path)
    assert "lora-dpo sweep" in found["left"]["unknown"]
    assert "calyrex-dpo-s1 calyrex-dpo" in found["left"]["unknown"]
    assert "calyrex-dpo-s1 pairs" in found["left"]["unknown"]
    text = "\n".join(lines(found))
    assert "no finished record to go by: calyrex-dpo-s1 calyrex-dpo" in text


def test_a_run_the_epoch_cap_stopped_while_its_loss_fell_is_not_called_converged(tmp_path):
    """The training table's `last fall` and the words under it: a run whose last evaluation is
    its best, not stopped by patience, was still improving when the cap ended it."""
    from calyrex.research.study.markdown import _training_words
    from calyrex.research.study.report import _at_the_end

    def run(name, losses, stopped):
        where = tmp_path / "train" / name
        where.mkdir(parents=True)
        rows = [{"step": 100 * k, "eval_loss": v} for k, v in enumerate(losses)]
        (where / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        best = min(rows, key=lambda r: r["eval_loss"])["step"]
        return name, {"validation": {"best": {"step": best}, "stopped_early": stopped}}

    falling = run("calyrex-late8th-s0", [2.52, 2.43, 2.38, 2.37], False)
    turned = run("parallel_mlp-s0", [2.52, 2.38, 2.35, 2.38, 2.37], True)
    assert _at_the_end(tmp_path, [falling]) == {"last_fall": [0.01], "capped": 1}
    assert _at_the_end(tmp_path, [turned]) == {"last_fall": [0.01], "capped": 0}
    rows = {"calyrex-late8th": {"capped": 1, "last_fall": [0.01], "seeds": 1}}
    rows["parallel_mlp"] = {"capped": 0, "last_fall": [0.01], "seeds": 1}
    words = _training_words({"sweep": {"x": 1}, "training": rows})[0]
    assert "Still improving when the epoch cap stopped them" in words
    assert "calyrex-late8th (1 of 1 runs)" in words and "parallel_mlp (" not in words


def test_the_held_out_items_run_on_the_base_each_arms_chosen_seed_and_one_seed_arms():
    from calyrex.research.study.plan import heldout_due

    due = {run for run, arm, seed in runs(FULL) if heldout_due(FULL, arm, seed)}
    assert due == {
        "base",
        "calyrex-late8th-s1",
        "lora-s1",
        "parallel_mlp-s1",
        "calyrex-dpo-s1",
        "lora-dpo-s1",
        "parallel_mlp-dpo-s1",
        "calyrex-analyze-s0",
        "calyrex-rpo-s2",  # one seed
        "lora-rpo-s2",
    }
    assert not any(heldout_due(V1, arm, seed) for _, arm, seed in runs(V1))  # the first study


def test_the_readme_names_each_dpo_runs_kinds_of_pair():
    """A DPO run's mean validation accuracy can hide a kind of pair it lost: the README line
    gives every kind's accuracy and n, in the report's order, then the mean."""
    from calyrex.research.study.markdown import rewards_by_tag_words

    def m(acc):
        return {"rewards/accuracies": acc}

    found = {"n": {"granted": 12, "hijack": 13}, "by_tag": {"granted": m(0.0), "hijack": m(1.0)}}
    report = {"rewards_by_tag": {"calyrex-dpo-s1": found | {"all": m(0.74)}}}
    assert rewards_by_tag_words(report) == [
        "- calyrex-dpo-s1 (DPO), validation pairs won by kind (`rewards_by_tag.json`): "
        "granted 0 % (n 12), hijack 100 % (n 13); all 74 %."
    ]
    assert rewards_by_tag_words({}) == []


def test_a_mix_is_made_again_for_a_new_recipe_until_a_run_trained_on_it(tmp_path, monkeypatch):
    """The preference pairs may be balanced (issue 38) while only SFT runs exist; once a DPO
    sweep or run read them, a new recipe is refused, naming what trained on the file. A mix
    recorded before ``balance_grants`` existed counts as unbalanced."""
    from dataclasses import replace
    from pathlib import Path

    from calyrex.research.mix import command
    from calyrex.research.study.data import make_mix

    made = []

    def fake_mix(out, kind, n, seed, access, val, balance_grants):
        made.append(Path(out).name)
        Path(out).write_text("")
        config = {"n": n, "seed": seed, "access": access, "val": val}
        config |= {"balance_grants": balance_grants} if balance_grants else {}
        Path(out).with_suffix(".stats.json").write_text(json.dumps({"config": config}))

    monkeypatch.setattr(command, "mix", fake_mix)
    unbalanced = replace(FULL, preference_balance=False)
    make_mix(unbalanced, tmp_path)
    assert made == ["sft.jsonl", "preference.jsonl"]
    made.clear()
    make_mix(unbalanced, tmp_path)  # recorded without the field: the same recipe
    assert made == []
    (tmp_path / "train" / "calyrex-late8th-s1").mkdir(parents=True)
    (tmp_path / "sweep" / "calyrex-sft-lr0.001").mkdir(parents=True)
    make_mix(FULL, tmp_path)  # SFT runs never read the pairs
    assert made == ["preference.jsonl"]
    for trained in ("sweep/calyrex-dpo-lr0.0003", "train/lora-dpo-s2"):
        (tmp_path / trained).mkdir()
        with pytest.raises(ValueError, match=f"and {trained} trained on it: use a new --out"):
            make_mix(unbalanced, tmp_path)
        (tmp_path / trained).rmdir()
    with pytest.raises(ValueError, match="and train/calyrex-late8th-s1, sweep/calyrex-sft"):
        make_mix(replace(FULL, val_rows=100), tmp_path)


def test_a_mix_made_again_for_runs_that_trained_on_it_must_be_the_same_rows(tmp_path, monkeypatch):
    """The mixes are not committed, their records are: on another machine the study makes them
    again, and where runs trained on one, rows that differ from the record's sha256 (the mix's
    code changed mid-study) stop the study with the record put back as it was."""
    from pathlib import Path

    from calyrex.research.mix import command
    from calyrex.research.study.data import make_mix

    rows = {"sft.jsonl": "a", "preference.jsonl": "p"}

    def fake_mix(out, kind, n, seed, access, val, balance_grants):
        text = rows[Path(out).name]
        Path(out).write_text(text)
        config = {"n": n, "seed": seed, "access": access, "val": val}
        config |= {"balance_grants": balance_grants} if balance_grants else {}
        record = {"config": config, "sha256": text, "validation": {"sha256": text + "v"}}
        Path(out).with_suffix(".stats.json").write_text(json.dumps(record))

    monkeypatch.setattr(command, "mix", fake_mix)
    make_mix(FULL, tmp_path)
    (tmp_path / "train" / "calyrex-late8th-s0").mkdir(parents=True)
    recorded = (tmp_path / "data" / "sft.stats.json").read_text()
    (tmp_path / "data" / "sft.jsonl").unlink()  # a new machine: the record, not the rows
    make_mix(FULL, tmp_path)  # the same code: the same rows, made again
    assert (tmp_path / "data" / "sft.jsonl").read_text() == "a"
    (tmp_path / "data" / "sft.jsonl").unlink()
    rows["sft.jsonl"] = "b"  # the mix's code changed
    for _ in range(2):  # the rows made are removed: a second try is refused again
        with pytest.raises(ValueError, match="rows differ from the ones train/calyrex-late8th-s0"):
            make_mix(FULL, tmp_path)
        assert (tmp_path / "data" / "sft.stats.json").read_text() == recorded
        assert not (tmp_path / "data" / "sft.jsonl").exists()
    (tmp_path / "data" / "preference.jsonl").unlink()  # no run read the pairs: made anew
    rows["preference.jsonl"] = "q"
    (tmp_path / "data" / "sft.jsonl").write_text("a")
    make_mix(FULL, tmp_path)
    assert (tmp_path / "data" / "preference.jsonl").read_text() == "q"


def test_a_sweep_recorded_for_another_grid_is_swept_again(tmp_path, monkeypatch):
    """chosen.json's choice stands for the grid it was swept on only: a recipe with another grid
    sweeps again (the values already trained are read back, not trained twice)."""
    import calyrex.research.study.train as study_train

    monkeypatch.setattr(study_train, "_sweep_loss", lambda c, a, k, lr, *rest: abs(lr - 3e-4))
    monkeypatch.setattr(study_train, "_val", lambda *a: tmp_path)
    (tmp_path / "sweep").mkdir()
    old = {"lora-sft": {"lr": 1e-2, "grid": [1e-2, 3e-2], "extend": FULL.sweep_extend}}
    (tmp_path / "sweep" / "chosen.json").write_text(json.dumps(old))
    assert study_train.chosen_lr(FULL, FULL.arm("lora"), tmp_path, tmp_path) == 3e-4
    chosen = json.loads((tmp_path / "sweep" / "chosen.json").read_text())["lora-sft"]
    assert chosen["grid"] == list(FULL.lr_grid)


def test_an_evaluation_that_did_not_finish_ok_is_not_finished(tmp_path):
    from calyrex.research.study.plan import finished

    suite = FULL.suites[0]
    where = tmp_path / "eval" / "base" / suite.key
    where.mkdir(parents=True)
    (where / f"{suite.name}.json").write_text(json.dumps({"status": "error", "seconds": 3}))
    assert finished(tmp_path, "base", suite) is None
    (where / f"{suite.name}.json").write_text(json.dumps({"status": "ok", "seconds": 3}))
    assert finished(tmp_path, "base", suite) == {"status": "ok", "seconds": 3}


def test_an_equal_time_arm_takes_its_steps_from_the_seconds(tmp_path):
    """The first study's equal-wall-time arm: its reference's seconds over its own method's
    seconds a step (here LoRA took 1,000 s, CALYREX 2.5 s a step: 400 steps, not LoRA's 100)."""
    from calyrex.research.study.train import _steps

    for run, record in {"lora-s0": (1000.0, 100), "calyrex-late8th-s0": (250.0, 100)}.items():
        (tmp_path / "train" / run).mkdir(parents=True)
        summary = {"seconds": record[0], "steps": record[1]}
        (tmp_path / "train" / run / "summary.json").write_text(json.dumps(summary))
    assert _steps(V1, V1.arm("calyrex-equal-time"), tmp_path) == 400


def test_an_arm_trains_to_convergence_with_its_patience_once(tmp_path, monkeypatch):
    """train_arm: a finished run is not trained again; a run to convergence gets the recipe's
    epochs, evaluation steps and patience; a DPO arm reads the preference mix's validation
    split, which its own recipe size decides."""
    from dataclasses import replace

    import calyrex.research.study.train as study_train

    calls = []
    monkeypatch.setattr(study_train, "_train", lambda *a, **kw: calls.append((a[1].label, kw)))
    monkeypatch.setattr(study_train, "chosen_lr", lambda *a: 1e-3)
    monkeypatch.setattr(study_train, "_pair_kinds", lambda *a: None)
    arm = FULL.arm("lora")
    study_train.train_arm(FULL, arm, 0, tmp_path / "data", tmp_path, None)
    ((label, budget),) = calls
    assert budget["patience"] == FULL.patience and budget["epochs"] == FULL.epochs
    assert budget["eval_steps"] == FULL.eval_steps
    (tmp_path / "train" / "lora-s0").mkdir(parents=True)
    (tmp_path / "train" / "lora-s0" / "summary.json").write_text("{}")
    study_train.train_arm(FULL, arm, 0, tmp_path / "data", tmp_path, None)
    assert len(calls) == 1  # finished: not trained again
    no_sft_val = replace(FULL, val_rows=0)
    dpo = next(a for a in FULL.arms if a.objective == "dpo")
    assert study_train._val(no_sft_val, tmp_path, dpo) is not None
    assert study_train._val(no_sft_val, tmp_path, arm) is None


def test_the_validation_curve_is_the_logged_validation_losses(tmp_path):
    from calyrex.research.study.curves import eval_losses

    rows = [
        {"step": 0, "eval_loss": 2.5},
        {"step": 20, "loss": 2.9},
        {"step": 100, "eval_loss": 2.4},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert eval_losses(tmp_path / "metrics.jsonl") == [(0, 2.5), (100, 2.4)]
    assert eval_losses(tmp_path / "none.jsonl") == []
