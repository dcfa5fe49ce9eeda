"""`calyrex ablate --model M --data D --suite S`: the ablation on any model, data and eval suite
(here a tiny model saved from a config, a small chat file and the IFEval fixture), resumable."""

import json
from pathlib import Path

import pytest

from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.cli import main

FIX = Path(__file__).parent / "fixtures" / "eval"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ablation")
    tiny_model("qwen2", num_hidden_layers=8).save_pretrained(root / "base")
    tiny_tokenizer("chatml").save_pretrained(root / "base")
    rows = [
        {
            "messages": [
                {"role": "system", "content": "Answer in capitals."},
                {"role": "user", "content": f"say {w}"},
                {"role": "assistant", "content": w.upper()},
            ]
        }
        for w in ("apple", "river", "stone", "cloud") * 4
    ]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _args(setup, out):
    return [
        "ablate",
        "--model",
        str(setup / "base"),
        "--data",
        str(setup / "train.jsonl"),
        "--suite",
        "ifeval",
        "--eval-data",
        str(FIX / "ifeval_input.jsonl"),
        "--presets",
        "last",
        "every4",
        "--steps",
        "2",
        "--max-new-tokens",
        "4",
        "--out",
        str(out),
    ]


def test_ablation_on_any_model_data_and_suite(setup, tmp_path, capsys):
    out = tmp_path / "ab"
    assert main(_args(setup, out)) == 0
    results = json.loads((out / "ablation.json").read_text())
    rows = results["placements"]
    assert list(rows) == ["base", "last", "every4"]
    assert rows["last"]["layers"] == [7] and rows["every4"]["layers"] == [3, 7]
    assert rows["last"]["trainable_params"] < rows["every4"]["trainable_params"]
    assert rows["last"]["steps"] == 2
    metrics = [k for k in rows["base"] if k.startswith("ifeval/") and k.endswith("_acc")]
    assert "ifeval/prompt_level_strict_acc" in metrics
    for row in rows.values():
        assert all(0.0 <= row[m] <= 1.0 for m in metrics)
    # each preset's eval is an ordinary `calyrex eval` run (reportable with `calyrex report`)
    assert (out / "last" / "eval" / "ifeval.json").is_file()
    table = (out / "ablation.md").read_text().splitlines()
    assert len(table) == 2 + 3 and "ifeval/prompt_level_strict_acc" in table[0]
    assert "n_prompts" not in table[0]  # counts stay in ablation.json, out of the table
    assert (out / "ablation.png").stat().st_size > 1000
    # a second run finds every adapter and eval done: it trains nothing and gives the same table
    capsys.readouterr()
    assert main(_args(setup, out)) == 0
    assert "finished earlier, not rerun" in capsys.readouterr().out
    assert (out / "ablation.md").read_text().splitlines() == table


def test_ablation_options_are_checked_before_any_compute(setup, tmp_path, capsys):
    assert main(["ablate", "--suite", "ifeval", "--out", str(tmp_path / "a")]) == 2
    assert "need --model" in capsys.readouterr().err
    assert main(["ablate", "--model", str(setup / "base"), "--out", str(tmp_path / "b")]) == 2
    assert "needs --data" in capsys.readouterr().err
    assert main(_args(setup, tmp_path / "q") + ["--quick"]) == 2
    assert "RuleWorld options" in capsys.readouterr().err
    args = _args(setup, tmp_path / "c")
    args[args.index("last")] = "nowhere"
    assert main(args) == 2
    assert "unknown placement preset 'nowhere'" in capsys.readouterr().err
    assert not (tmp_path / "c" / "base").exists()


def test_training_options_come_from_a_train_yaml(setup, tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(
        f"model: elsewhere\ndata: {setup / 'train.jsonl'}\nmethod: lora\nmax_steps: 3\nlr: 0.004\n"
    )
    out = tmp_path / "ab"
    args = ["ablate", "--model", str(setup / "base"), "--config", str(config), "--suite", "ifeval"]
    args += ["--eval-data", str(FIX / "ifeval_input.jsonl"), "--presets", "last"]
    assert main(args + ["--max-new-tokens", "2", "--out", str(out)]) == 0
    summary = json.loads((out / "last" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["config"]["lr"] == 0.004
    assert summary["config"]["method"] == "calyrex" and summary["config"]["placement"] == "last"
    assert summary["config"]["model"] == str(setup / "base")  # --model wins over the YAML
