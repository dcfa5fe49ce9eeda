"""IFEval scoring: offline punkt, hand-made responses with known scores, exact agreement with the
official scores on the real data, the ``calyrex eval --responses`` command and resumability."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calyrex.cli import main
from calyrex.eval.data import read_rows, shared_data_dir
from calyrex.eval.ifeval import load_ifeval, pair_responses, score_responses

FIX = Path(__file__).parent / "fixtures" / "eval"
IFEVAL = shared_data_dir() / "ifeval"


def test_punkt_tab_offline_without_download(tmp_path):
    """A fresh HOME, nltk.download patched to fail: sentences are still counted."""
    code = (
        "import nltk\n"
        "def no(*a, **k): raise RuntimeError('network download attempted')\n"
        "nltk.download = no\n"
        "from calyrex.eval.punkt import ensure_punkt_tab\n"
        "root = ensure_punkt_tab()\n"
        "from lm_eval.tasks.ifeval import instructions_util as u\n"
        "print(root, u.count_sentences('Hello Mr. Smith. How are you? Fine.'))\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("NLTK_DATA", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    root, count = out.stdout.split()
    assert count == "3"
    assert Path(root) == tmp_path / "cache" / "calyrex" / "nltk_data"
    assert (Path(root) / "tokenizers" / "punkt_tab" / "english" / "ortho_context.tab").is_file()


def test_hand_made_responses_have_known_scores():
    items = load_ifeval(str(FIX / "ifeval_input.jsonl"))
    rows = read_rows(FIX / "ifeval_responses.jsonl")
    metrics, details = score_responses(items, [r["response"] for r in pair_responses(items, rows)])
    assert [d["follow_all_instructions_strict"] for d in details] == [1, 1, 1, 0, 0]
    assert [d["follow_all_instructions_loose"] for d in details] == [1, 1, 1, 1, 0]
    assert metrics["prompt_level_strict_acc"] == pytest.approx(3 / 5)
    assert metrics["inst_level_strict_acc"] == pytest.approx(4 / 6)
    assert metrics["prompt_level_loose_acc"] == pytest.approx(4 / 5)
    assert metrics["inst_level_loose_acc"] == pytest.approx(5 / 6)


@pytest.mark.skipif(not IFEVAL.is_dir(), reason="shared IFEval reference data not present")
def test_exact_agreement_with_official_scores(tmp_path):
    """GPT-4's 541 responses: every per-prompt result and the four accuracies equal the official."""
    rc = main(
        [
            "eval",
            "--suite",
            "ifeval",
            "--responses",
            str(IFEVAL / "input_response_data_gpt4.jsonl"),
            "--data",
            str(IFEVAL / "input_data.jsonl"),
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    official = read_rows(IFEVAL / "gpt4_official_scores.jsonl")
    ours = read_rows(tmp_path / "ifeval.details.jsonl")
    assert len(ours) == len(official) == 541
    for o, d in zip(official, ours, strict=True):
        assert d == o, o["key"]
    summary = json.loads((IFEVAL / "gpt4_official_summary.json").read_text())
    metrics = json.loads((tmp_path / "ifeval.json").read_text())["metrics"]
    for name in ("prompt_level_strict_acc", "inst_level_strict_acc"):
        assert metrics[name] == summary[name]
    for name in ("prompt_level_loose_acc", "inst_level_loose_acc"):
        assert metrics[name] == summary[name]


def test_key_2785_is_paired_by_position():
    items = [{"key": 1, "prompt": "a"}, {"key": 2785, "prompt": "new prompt"}]
    rows = [{"prompt": "a", "response": "x"}, {"prompt": "old prompt", "response": "y"}]
    with pytest.warns(UserWarning, match="2785"):
        paired = pair_responses(items, rows)
    assert [r["response"] for r in paired] == ["x", "y"]


def test_cli_responses_writes_results_and_resumes(tmp_path, capsys):
    args = ["eval", "--suite", "ifeval", "--responses", str(FIX / "ifeval_responses.jsonl")]
    args += ["--data", str(FIX / "ifeval_input.jsonl"), "--out", str(tmp_path)]
    assert main(args) == 0
    record = json.loads((tmp_path / "ifeval.json").read_text())
    assert record["status"] == "ok"
    assert record["metrics"]["prompt_level_strict_acc"] == pytest.approx(0.6)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["suites"]["ifeval"]["metrics"]["inst_level_loose_acc"] == pytest.approx(5 / 6)
    assert main(args) == 0
    assert "finished earlier, not rerun" in capsys.readouterr().out


def test_unanswered_prompts_are_listed_not_scored(tmp_path):
    responses = tmp_path / "r.jsonl"
    responses.write_text(
        "".join(json.dumps(r) + "\n" for r in read_rows(FIX / "ifeval_responses.jsonl")[:3])
    )
    args = ["eval", "--suite", "ifeval", "--responses", str(responses)]
    assert main(args + ["--data", str(FIX / "ifeval_input.jsonl"), "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "ifeval.json").read_text())
    assert record["missing"] == ["4", "5"]
    assert record["metrics"]["n_prompts"] == 3
    assert record["metrics"]["prompt_level_strict_acc"] == 1.0


def test_wrong_format_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "hi"}\n')
    rc = main(
        [
            "eval",
            "--suite",
            "ifeval",
            "--responses",
            str(bad),
            "--data",
            str(bad),
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 2
    assert "lacks ['key', 'prompt', 'instruction_id_list', 'kwargs']" in capsys.readouterr().err


def test_a_response_is_paired_by_position_only_when_both_files_have_as_many_rows():
    items = [{"key": k, "prompt": p} for k, p in ((1, "A"), (2, "B"), (3, "C"))]
    fewer = [{"prompt": "B", "response": "b"}, {"prompt": "old C", "response": "c"}]
    assert pair_responses(items, fewer) == [None, fewer[0], None]  # A and C: missing
    same = [{"prompt": "A", "response": "a"}, *fewer]
    with pytest.warns(UserWarning, match="IFEval key 3"):
        assert pair_responses(items, same) == same  # old C takes C's place, with a warning


def test_sys_ifeval_refuses_a_row_that_is_not_a_system_and_a_user_turn(tmp_path):
    from calyrex.eval.data import DataFormatError
    from calyrex.eval.sys_ifeval import load_sys_ifeval

    row = {"key": 7, "prompt": "Hi", "instruction_id_list": [], "kwargs": []}
    good = row | {
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    }
    bad = row | {"key": 8, "messages": [{"role": "user", "content": "U"}]}
    file = tmp_path / "s.jsonl"
    file.write_text(json.dumps(good) + "\n")
    assert [it["id"] for it in load_sys_ifeval(str(file))] == ["7"]
    file.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataFormatError, match="key 8 is not a system"):
        load_sys_ifeval(str(file))
