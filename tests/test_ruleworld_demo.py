"""``calyrex demo --quick``: runs end to end and writes well-formed results, table and plots."""

import json
import math

import pytest

import calyrex
from calyrex.cli import main
from calyrex.eval.intervals import is_rate
from calyrex.research.ruleworld.families import FAMILIES
from calyrex.research.ruleworld.report import PLOTS, TABLE, text_table
from calyrex.research.ruleworld.train import DEVICE, DTYPE, backbone_dir, backbone_name

METHODS = {"base", "calyrex", "lora", "parallel_mlp"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--quick", "--out", str(out)]) in (0, None)
    return out


def _rates(tree):
    """Every leaf of a metrics tree: each must be a rate with its n and ci95."""
    if is_rate(tree):
        return [tree]
    assert isinstance(tree, dict), tree
    return [r for v in tree.values() for r in _rates(v)]


def test_quick_demo_writes_well_formed_files(quick, capsys):
    results = json.loads((quick / "results.json").read_text())
    assert set(results["methods"]) == METHODS
    for metrics in results["methods"].values():
        for key, _ in TABLE:
            entry = metrics[key]
            assert 0.0 <= entry["rate"] <= 1.0 or math.isnan(entry["rate"]), key
        for entry in _rates(metrics):  # every rate carries n and a 95 % interval around it
            lo, hi = entry["ci95"]
            assert entry["n"] > 0 and 0.0 <= lo <= entry["rate"] <= hi <= 1.0, entry
        assert set(metrics["manyshot_success_by_shots"]) == {"1", "4", "16"}
        assert set(metrics["longctx_adherence_by_tokens"]) == {"0", "256"}
        assert {f"attack_{f}_success" for f in FAMILIES} <= set(metrics)
    setup = results["setup"]
    counts = [setup[m]["trainable_params"] for m in ("calyrex", "lora", "parallel_mlp")]
    assert min(counts) > 0 and max(counts) <= 1.1 * min(counts)  # parameter-matched
    text = (quick / "results.md").read_text()
    assert all(f" {m} |" in text for m in METHODS) and "injection" in text and "[" in text
    for _, _, _, name in PLOTS:
        assert (quick / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((quick / "run.json").read_text())["seconds"] > 0
    for method in ("calyrex", "lora"):  # 15 steps, logging every step: the last one is there
        lines = (quick / method / "metrics.jsonl").read_text().splitlines()
        assert json.loads(lines[-1])["step"] == setup["steps"]


def test_printed_table_fits_80_columns():
    wide = {"rate": 0.41, "n": 1024, "ci95": [0.0, 1.0]}
    methods = {m: {k: wide for k, _ in TABLE} for m in ("base", "calyrex", "lora", "parallel_mlp")}
    table = text_table(methods)
    assert max(len(line) for line in table.splitlines()) <= 80, table
    assert len(table.splitlines()) == len(TABLE) + 1 and "0.41 .00–1.0" in table


def test_same_seed_gives_identical_results(quick, tmp_path):
    """Same seed, same machine: the same results.json, byte for byte (wall times are apart)."""
    assert main(["demo", "--quick", "--out", str(tmp_path)]) in (0, None)
    assert (tmp_path / "results.json").read_text() == (quick / "results.json").read_text()


def test_pretrain_flag_builds_a_fresh_backbone_in_out(tmp_path):
    path = backbone_dir(tmp_path, quick=True, seed=0, given=None, fresh=True)
    assert path == tmp_path / "backbone"
    record = json.loads((path / "ruleworld.json").read_text())
    assert record["command"].startswith("calyrex ruleworld-pretrain --seed 0")
    model, tok = calyrex.load_model(str(path), None, DTYPE, DEVICE)
    assert model.config.num_hidden_layers >= 12 and tok.chat_template
    mtime = (path / "model.safetensors").stat().st_mtime
    assert backbone_dir(tmp_path, quick=True, seed=0, given=None, fresh=True) == path
    assert (path / "model.safetensors").stat().st_mtime == mtime  # reused, not retrained


def test_seeds_report_mean_and_spread_per_method(tmp_path, monkeypatch):
    """--seeds trains once per seed; each rate becomes the mean with its spread (wiring only:
    the per-seed runs are stubbed, the quick demo above covers training and evaluation)."""
    from calyrex.eval.intervals import proportion
    from calyrex.research.ruleworld import demo as demo_module
    from calyrex.research.ruleworld.evaluate import EvalConfig

    def one_seed(root, cfg, world, path, seed):
        rate = proportion([True] * (seed + 1) + [False] * (3 - seed))
        curve = {"1": rate, "2": rate}
        metrics = {"task_accuracy": rate, **{key: curve for key, *_ in PLOTS}}
        methods = {m: metrics for m in METHODS}
        trained = {m: {"trainable_params": 10, "train_loss": 1.0 + seed} for m in METHODS}
        return methods, trained, {m: 1.0 for m in METHODS}, EvalConfig(n=4)

    monkeypatch.setattr(demo_module, "_one_seed", one_seed)
    monkeypatch.setattr(demo_module, "evaluate", lambda *args: {})  # the base: stubbed too
    results = demo_module.run_demo(quick=True, out=str(tmp_path), seeds=[0, 1, 2])
    entry = results["methods"]["lora"]["task_accuracy"]
    assert entry["seeds"] == [0.25, 0.5, 0.75] and entry["rate"] == 0.5 and entry["n"] == 4
    assert entry["ci95"][0] < 0.5 < entry["ci95"][1] and entry["sd"] == 0.25
    assert set(results["per_seed"]) == {"0", "1", "2"}
    assert results["setup"]["calyrex"]["train_loss"] == [1.0, 2.0, 3.0]
    assert "sd 0.25" in (tmp_path / "results.md").read_text()
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["command"] == "calyrex demo --quick --seeds 0 1 2"


def test_presets_sizes_and_recorded_command():
    """--full has the issue's power (>= 3 seeds, >= 128 per suite, >= 64 per attack family);
    the default is smaller; a backbone directory is recorded by its name, not its path."""
    from calyrex.research.ruleworld.demo import DEFAULT, FULL, _command
    from calyrex.research.ruleworld.pretrain import ASSET_DIR

    assert len(FULL.seeds) >= 3 and FULL.eval["n"] >= 128 and FULL.eval["family_n"] >= 64
    assert (
        FULL.eval["long_n"] * len(FULL.eval["context_tokens"]) >= 128
        and FULL.eval["shot_n"] * 6 >= 128
    )  # per suite
    assert DEFAULT.seeds is None and DEFAULT.steps < FULL.steps
    assert _command("full", 0, None, "/some/where/bb", False) == "calyrex demo --full --backbone bb"
    assert backbone_name(ASSET_DIR) == "ruleworld"
