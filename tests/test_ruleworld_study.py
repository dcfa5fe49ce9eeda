"""The variant study: wiring of a CI-sized run, the rendered table and the goal's verdict."""

import json

from calyrex.eval.intervals import proportion
from calyrex.research.ruleworld.study import VARIANTS, run_study
from calyrex.research.ruleworld.study_report import COLUMNS, render_study, verdicts


def test_quick_study_trains_matched_variants_and_renders(tmp_path):
    entry = run_study(str(tmp_path), ["late8th", "six-narrow"], quick=True)
    methods, setup = entry["results"]["methods"], entry["results"]["setup"]
    assert list(methods) == ["base", "late8th", "six-narrow"]
    counts = [v["trainable_params"] for v in setup["variants"].values()]
    assert max(counts) <= 1.01 * min(counts)  # one parameter budget
    assert list(setup["variants"]["six-narrow"]["layers"]) == [1, 3, 5, 7, 9, 11]
    for key, _ in COLUMNS:
        assert all("ci95" in m[key] for m in methods.values()), key
    assert json.loads((tmp_path / "study.json").read_text()) == json.loads(json.dumps(entry))
    text = render_study(tmp_path / "study.json")
    assert "| six-narrow | 1,3,5,7,9,11 |" in text and "LoRA was not run" in text


def test_study_over_training_seeds_reuses_seed_0_and_averages(tmp_path):
    """``train_seeds``: seed 0's adapter (already trained) is reused, the others train into
    ``NAME-seedS``; every rate is the mean over the seeds with each seed's kept."""
    first = run_study(str(tmp_path), ["late8th"], quick=True)
    entry = run_study(str(tmp_path), ["late8th"], quick=True, train_seeds=[0, 1])
    assert (tmp_path / "late8th-seed1" / "adapter").is_dir()
    results = entry["results"]
    trained = results["setup"]["variants"]["late8th"]
    assert trained["reused"] and len(trained["train_losses"]) == 2
    assert results["per_seed"]["late8th"]["0"] == first["results"]["methods"]["late8th"]
    heldout = results["methods"]["late8th"]["rule_adherence_heldout"]
    seeds = [results["per_seed"]["late8th"][s]["rule_adherence_heldout"]["rate"] for s in "01"]
    assert heldout["seeds"] == seeds and abs(heldout["rate"] - sum(seeds) / 2) < 1e-3
    assert entry["command"].endswith("--train-seeds 0 1")
    assert "training seeds 0, 1" in render_study(tmp_path / "study.json")


def _metrics(heldout, attacks, tasks):
    rate = {k: proportion([True, False]) for k, _ in COLUMNS}
    rate["rule_adherence_heldout"] = proportion([True] * heldout + [False] * (100 - heldout))
    rate["attack_families_success"] = proportion([True] * attacks + [False] * (100 - attacks))
    rate["task_accuracy"] = proportion([True] * tasks + [False] * (100 - tasks))
    return rate


def test_goal_needs_lora_level_rules_and_attacks_and_base_tasks():
    methods = {
        "base": _metrics(0, 70, 73),
        "a": _metrics(45, 25, 73),  # within LoRA's intervals, tasks at the base: meets the goal
        "b": _metrics(10, 25, 73),  # held-out separated below LoRA
        "c": _metrics(50, 20, 72),  # tasks moved off the base
        "lora": _metrics(50, 22, 67),
    }
    variants = {n: {"method": "calyrex", "steps": None} for n in ("a", "b", "c")}
    variants["lora"] = {"method": "lora", "steps": None}
    lines = verdicts(methods, variants)
    assert lines[-1].startswith("**Goal met by**: a (vs lora) (")
    assert "worse on held-out ↑" in lines[1]
    # a variant trained longer is judged against the LoRA trained as long, when there is one
    methods |= {"d": _metrics(45, 25, 73), "lora-300": _metrics(80, 5, 60)}
    variants |= {
        "d": {"method": "calyrex", "steps": 300},
        "lora-300": {"method": "lora", "steps": 300},
    }
    lines = verdicts(methods, variants)
    assert any(line.startswith("- **d vs lora-300**: worse on held-out") for line in lines)
    assert lines[-1].startswith("**Goal met by**: a (vs lora) (")
    assert {v.name for v in VARIANTS} >= {"late8th", "mid8th", "every4", "lora"}
    # a study of one pair (the seeds record): its LoRA need not be called ``lora``
    pair = {k: methods[k] for k in ("base", "a", "lora-300")}
    lines = verdicts(pair, {"a": variants["a"], "lora-300": variants["lora-300"]})
    assert lines[0].startswith("- **a vs lora-300**: worse on held-out")


def test_every_calyrex_variant_has_the_late8th_budget_on_the_shipped_backbone():
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from calyrex import CalyrexConfig
    from calyrex.adapters.baselines import cal_budget
    from calyrex.research.ruleworld.pretrain import ASSET_DIR

    config = AutoConfig.from_pretrained(ASSET_DIR)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    want = cal_budget(model, CalyrexConfig(placement="late8th"))
    for v in VARIANTS:
        if v.method != "calyrex":
            continue
        cfg = CalyrexConfig(
            placement=v.placement, layers=v.layers and list(v.layers), **dict(v.block)
        )
        got = cal_budget(model, cfg)
        assert abs(got - want) <= 0.02 * want, (v.name, got, want)


def test_shipped_ruleworld_config_is_the_study_variant():
    from pathlib import Path

    from calyrex.research.ruleworld.demo import TRAINING
    from calyrex.training import TrainConfig

    path = Path(__file__).parent.parent / "configs/ruleworld/calyrex-late8th-300steps.yaml"
    cfg = TrainConfig.from_yaml(path)
    cfg.validate()
    (v,) = [v for v in VARIANTS if v.name == "late8th-300steps"]
    assert (cfg.method, cfg.placement, cfg.layers, cfg.block) == (v.method, v.placement, None, None)
    assert cfg.max_steps == v.steps and cfg.lr == TRAINING.lr["calyrex"] and cfg.seed == 0
    assert (cfg.batch_size, cfg.max_length) == (TRAINING.batch_size, TRAINING.max_length)
    # the recorded study's training (``--full`` now trains otherwise, sized for 30 min)
    assert (TRAINING.conversations, TRAINING.steps, TRAINING.group_by_length) == (4000, 100, False)
    assert cfg.system_pool == [] and cfg.model == "ruleworld"
