"""``calyrex report`` on two fixture runs: the expected side-by-side table with deltas, plots."""

from pathlib import Path

import pytest

from calyrex.cli import main
from calyrex.eval.bench import EvalConfig
from calyrex.eval.runner import evaluate

FIX = Path(__file__).parent / "fixtures" / "eval"


def msj_judge(prompt):
    return "yes" if prompt.split("[REPLY]\n")[1].startswith("Sure") else "no"


@pytest.fixture
def runs(tmp_path):
    """Run 'base' scores the hand-made responses; run 'cal' scores perfect / refusing ones."""
    data = {"ifeval": str(FIX / "ifeval_input.jsonl"), "msj": str(FIX / "msj_examples.json")}
    perfect = tmp_path / "perfect.jsonl"
    perfect.write_text(
        (FIX / "ifeval_responses.jsonl").read_text().replace("BLUE", "blue").replace("?**", "?")
    )
    refusals = tmp_path / "refuse.jsonl"
    refusals.write_text((FIX / "msj_responses.jsonl").read_text().replace('"Sure', '"I refuse'))
    for label, ifeval, msj in (
        ("base", FIX / "ifeval_responses.jsonl", FIX / "msj_responses.jsonl"),
        ("cal", perfect, refusals),
    ):
        cfg = EvalConfig(data=data)
        evaluate(["ifeval"], tmp_path / label, cfg, str(ifeval), None, None, {"label": label})
        cfg = EvalConfig(data=data, limit=2)
        evaluate(
            ["msj"],
            tmp_path / f"{label}_msj",
            cfg,
            str(msj),
            None,
            lambda: msj_judge,
            {"label": label},
        )
    return tmp_path


def test_report_table_with_deltas_and_plots(runs, capsys):
    args = ["report", "--runs", str(runs / "base"), str(runs / "cal"), "--baseline", "base"]
    assert main(args + ["--out", str(runs / "report")]) == 0
    text = (runs / "report" / "report.md").read_text()
    assert text.splitlines()[:3] == [
        "| benchmark | metric | base | cal |",
        "|---|---|---|---|",
        "| ifeval | prompt_level_strict_acc | 0.6000 | 0.8000 (+0.2000) |",
    ]
    assert "| ifeval | n_prompts | 5.0000 | 5.0000 (+0.0000) |" in text
    capsys.readouterr()
    args = ["report", "--runs", str(runs / "base_msj"), str(runs / "cal_msj"), "--baseline", "base"]
    assert main(args + ["--out", str(runs / "report_msj")]) == 0
    text = (runs / "report_msj" / "report.md").read_text()
    assert "| msj | asr@2 | 0.5000 | 0.0000 (-0.5000) |" in text
    assert "| msj | asr@4 | 1.0000 | 0.0000 (-1.0000) |" in text
    assert (runs / "report_msj" / "msj_success_vs_shots.png").stat().st_size > 1000
    assert "![msj_success_vs_shots](msj_success_vs_shots.png)" in text


def test_report_refuses_an_unknown_baseline(runs, capsys):
    args = ["report", "--runs", str(runs / "base"), str(runs / "cal"), "--baseline", "lora"]
    assert main(args + ["--out", str(runs / "r")]) == 2
    assert "baseline 'lora' is not one of the runs ['base', 'cal']" in capsys.readouterr().err
