"""The one model resolver (issue 14): ruleworld, a directory, or a hub id; no retries offline."""

import time

import pytest

from calyrex.backbones.resolve import ModelNotFoundError, resolve_model
from calyrex.research.ruleworld.pretrain import ASSET_DIR


def test_ruleworld_and_directories_resolve_locally(tmp_path):
    assert resolve_model("ruleworld") == str(ASSET_DIR)
    assert resolve_model(tmp_path) == str(tmp_path)


def test_a_missing_path_fails_at_once(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no model directory"):
        resolve_model(str(tmp_path / "nope" / "deeper"))
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ModelNotFoundError, match="is a file"):
        resolve_model(tmp_path / "weights.bin")


def test_an_unreachable_hub_id_fails_fast_with_the_reason(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="not in the local hub cache"):
        resolve_model("calyrex-test/no-such-model")
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--data", "{tmp}/x.jsonl", "--out", "{tmp}/t"],
        ["eval", "--suite", "ifeval", "--out", "{tmp}/e"],
        ["chat"],
        ["ablate", "--data", "{tmp}/x.jsonl", "--suite", "ifeval", "--out", "{tmp}/a"],
        ["ruleworld-eval"],
        ["demo", "--quick", "--out", "{tmp}/d", "--backbone"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_subcommand_fails_at_once_on_an_unreachable_model(
    argv, tmp_path, monkeypatch, capsys
):
    import huggingface_hub

    from calyrex.cli import main

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    (tmp_path / "x.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    flag = [] if argv[-1] == "--backbone" else ["--model"]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + flag + ["calyrex-test/no-such"]
    start = time.perf_counter()
    assert main(argv) == 2
    assert "not in the local hub cache" in capsys.readouterr().err
    assert time.perf_counter() - start < 10
