"""``calyrex demo --quick``: runs end to end and writes well-formed results, table and plots."""

import json
import math

from calyrex.cli import main
from calyrex.ruleworld.demo import _backbone
from calyrex.ruleworld.pretrain import load_backbone
from calyrex.ruleworld.report import PLOTS, TABLE

METHODS = {"base", "calyrex", "lora", "parallel_mlp"}


def test_quick_demo_writes_well_formed_files(tmp_path):
    assert main(["demo", "--quick", "--out", str(tmp_path)]) in (0, None)
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["methods"]) == METHODS
    for metrics in results["methods"].values():
        for key, _ in TABLE:
            assert 0.0 <= metrics[key] <= 1.0 or math.isnan(metrics[key]), key
        assert set(metrics["manyshot_success_by_shots"]) == {"1", "4", "16"}
        assert set(metrics["longctx_adherence_by_tokens"]) == {"0", "256"}
    setup = results["setup"]
    counts = [setup[m]["trainable_params"] for m in ("calyrex", "lora", "parallel_mlp")]
    assert min(counts) > 0 and max(counts) <= 1.1 * min(counts)  # parameter-matched
    text = (tmp_path / "results.md").read_text()
    assert all(f"| {m} |" in text for m in METHODS) and "injection" in text
    for _, _, _, name in PLOTS:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pretrain_flag_builds_a_fresh_backbone_in_out(tmp_path):
    path = _backbone(tmp_path, quick=True, seed=0, given=None, fresh=True)
    assert path == tmp_path / "backbone"
    record = json.loads((path / "ruleworld.json").read_text())
    assert record["command"].startswith("calyrex ruleworld-pretrain --seed 0")
    model, tok = load_backbone(path)
    assert model.config.num_hidden_layers >= 12 and tok.chat_template
    mtime = (path / "model.safetensors").stat().st_mtime
    assert _backbone(tmp_path, quick=True, seed=0, given=None, fresh=True) == path
    assert (path / "model.safetensors").stat().st_mtime == mtime  # reused, not retrained
