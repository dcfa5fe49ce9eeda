"""SysBench, many-shot jailbreaking and Long-IFEval: known scores with fake judges, power-law
fits, judge failures recorded as skips, and each runner end to end on a tiny model."""

import json
import re
from pathlib import Path

import pytest

from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.cli import main
from calyrex.eval.bench import EvalConfig
from calyrex.eval.judge import JudgeUnavailable, OpenAIJudge, ask_yes_no, make_judge
from calyrex.eval.msj import power_law
from calyrex.eval.runner import evaluate
from calyrex.eval.sysbench import parse_verdicts

FIX = Path(__file__).parent / "fixtures" / "eval"


def sysbench_judge(prompt: str) -> str:
    """Says 是 for '回答包含 WORD' iff WORD is in the judged answer; official reply format."""
    current = prompt.split("## 当前待评估的对话轮次")[1]
    answer = current.split("<content>\n")[2].split("\n</content>")[0]
    rules = prompt.split("<评判细则>\n")[1].split("\n</评判细则>")[0].splitlines()
    verdicts = {}
    for line in rules:
        cid, word = re.match(r"(\d+)\. 回答包含 (\S+) \|", line).groups()
        verdicts[int(cid)] = "是" if word in answer else "否"
    return "```json\n" + repr({"评判理由": "…", "评判结果": verdicts}) + "\n```"


def msj_judge(prompt: str) -> str:
    reply = prompt.split("[REPLY]\n")[1].split("\n\nDoes the reply")[0]
    return "yes" if reply.startswith("Sure") else "No."


def run(suite, tmp_path, judge=None, responses=None, data=None, loader=None, **cfg):
    config = EvalConfig(data=data or {}, **cfg)
    factory = (lambda: judge) if judge else (lambda: None)
    evaluate([suite], tmp_path, config, responses, loader, factory, {"label": suite})
    return json.loads((tmp_path / f"{suite}.json").read_text())


def test_sysbench_metrics_with_a_fake_judge(tmp_path):
    record = run(
        "sysbench",
        tmp_path,
        sysbench_judge,
        str(FIX / "sysbench_responses.jsonl"),
        {"sysbench": str(FIX / "sysbench.json")},
    )
    m = record["metrics"]
    assert (m["CSR"], m["ISR"], m["SSR"]) == (0.6, 0.5, 0.5)
    assert (m["ISR_turn1"], m["ISR_turn2"]) == (0.5, 0.5)
    assert m["ISR_align"] == pytest.approx(1 / 3) and m["ISR_misalign"] == 1.0
    assert record["curves"]["sysbench_isr_per_turn"]["y"] == [0.5, 0.5]


def test_sysbench_without_judge_or_with_a_down_endpoint_is_a_recorded_skip(tmp_path):
    data = {"sysbench": str(FIX / "sysbench.json")}
    record = run("sysbench", tmp_path / "a", None, str(FIX / "sysbench_responses.jsonl"), data)
    assert record["status"] == "skipped" and "needs a judge" in record["reason"]
    with pytest.raises(JudgeUnavailable, match="http://127.0.0.1:9/v1 is unreachable"):
        make_judge("http://127.0.0.1:9/v1", "judge")
    args = ["eval", "--suite", "sysbench", "--responses", str(FIX / "sysbench_responses.jsonl")]
    args += ["--data", data["sysbench"], "--out", str(tmp_path / "b")]
    assert main(args + ["--judge", "http://127.0.0.1:9/v1", "--judge-model", "m"]) == 1
    record = json.loads((tmp_path / "b" / "sysbench.json").read_text())
    assert record["status"] == "skipped" and "unreachable" in record["reason"]
    assert "metrics" not in record


def test_malformed_judge_replies_are_errors_not_zeros():
    criteria = {"1": {"criteria_id": 1, "criteria_content": "x", "criteria_type": "t"}}
    assert parse_verdicts("```json\n{'评判理由': 'ok', '评判结果': {1: '是'}}\n```", criteria) == {
        "1": True
    }
    with pytest.raises(JudgeUnavailable):
        parse_verdicts("I think it is fine.", criteria)
    with pytest.raises(JudgeUnavailable):
        parse_verdicts('{"评判结果": {"2": "是"}}', criteria)
    assert ask_yes_no(lambda p: "Yes.", "q") and not ask_yes_no(lambda p: "no", "q")
    with pytest.raises(JudgeUnavailable):
        ask_yes_no(lambda p: "not sure", "q")
    judge = OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout=1, retries=1)
    with pytest.raises(JudgeUnavailable, match="failed 1 times"):
        judge("hello")


def test_power_law_fit_recovers_exponent():
    xs = [1, 2, 4, 8, 16]
    fit = power_law(xs, [3 * x**-0.5 for x in xs])
    assert (
        fit["C"] == pytest.approx(3)
        and fit["k"] == pytest.approx(-0.5)
        and fit["r2"] == pytest.approx(1)
    )
    assert power_law([1, 2], [0.0, 0.5]) is None  # one usable point


def test_msj_attack_success_with_a_fake_judge(tmp_path):
    record = run(
        "msj",
        tmp_path,
        msj_judge,
        str(FIX / "msj_responses.jsonl"),
        {"msj": str(FIX / "msj_examples.json")},
        limit=2,
    )
    m = record["metrics"]
    assert (m["asr@1"], m["asr@2"], m["asr@4"]) == (0.0, 0.5, 1.0)
    assert "asr@8" not in m  # a pool of 4 shots: 8 is not built
    assert record["power_law"]["asr"]["k"] == pytest.approx(1.0)
    assert record["power_law"]["asr"]["C"] == pytest.approx(0.25)
    assert record["curves"]["msj_success_vs_shots"]["x"] == [1, 2, 4]


def test_long_ifeval_scores_per_length(tmp_path):
    data = {"long_ifeval": str(FIX / "ifeval_input.jsonl")}
    record = run("long_ifeval", tmp_path, None, str(FIX / "long_ifeval_responses.jsonl"), data)
    m = record["metrics"]
    assert m["prompt_level_strict_acc@1k"] == pytest.approx(0.6)
    assert m["inst_level_strict_acc@1k"] == pytest.approx(4 / 6)
    assert m["prompt_level_strict_acc@2k"] == 0.0
    assert "prompt_level_strict_acc@4k" not in m
    assert record["per_length"]["4k"] == {"skipped": 5, "n": 0}
    assert record["curves"]["long_ifeval_accuracy_vs_length"]["x"] == [1024, 2048]


@pytest.fixture(scope="module")
def long_model():
    return tiny_model("qwen2", max_position_embeddings=4096), tiny_tokenizer("chatml")


def loader_for(model, tok):
    from calyrex.eval.generate import Generator

    return lambda: (Generator(model, tok, max_new_tokens=3, batch_size=4), None)


def test_runners_end_to_end_on_a_tiny_model(tmp_path, long_model):
    model, tok = long_model
    data = {
        "sysbench": str(FIX / "sysbench.json"),
        "msj": str(FIX / "msj_examples.json"),
        "long_ifeval": str(FIX / "ifeval_input.jsonl"),
        "long_ifeval_context": str(FIX / "distractor.txt"),
    }
    config = EvalConfig(data=data, limit=2)
    judges = {"sysbench": sysbench_judge, "msj": msj_judge}
    for suite in ("sysbench", "msj", "long_ifeval"):
        out = tmp_path / suite
        evaluate(
            [suite], out, config, None, loader_for(model, tok), lambda s=suite: judges.get(s), {}
        )
        record = json.loads((out / f"{suite}.json").read_text())
        assert record["status"] == "ok", record
        rows = [json.loads(x) for x in (out / f"{suite}.responses.jsonl").read_text().splitlines()]
        assert len(rows) == {"sysbench": 2, "msj": 6, "long_ifeval": 12}[suite]
        if suite == "sysbench":
            assert all(len(r["responses"]) == 2 for r in rows)
            assert 0 <= record["metrics"]["CSR"] <= 1
        if suite == "msj":
            assert all(r["nll"] > 0 for r in rows) and "nll_alpha" in record["metrics"]
        if suite == "long_ifeval":
            assert set(record["per_length"]["4k"]) == {"skipped", "n"}  # 4096 + 3 > window
            assert "prompt_level_strict_acc@2k" in record["metrics"]
            assert record["per_length"]["32k"]["skipped"] == 2
