"""The analysis on tiny models whose answers are known by construction."""

import json
import math

import pytest
import torch

import calyrex
from calyrex.analysis import (
    RULES,
    AnalysisConfig,
    analyze_model,
    builtin_examples,
    read_jsonl,
    recommend,
    write_jsonl,
)
from calyrex.analysis.capture import encode_pair, system_share, uniform_share
from calyrex.backbones.tiny import tiny_model
from calyrex.cli import main
from conftest import randomize

CFG = AnalysisConfig(max_examples=64, progress=False)  # 8 per rule, 2 per rule held out


def known_model(copy_layer=None, num_layers=8):
    """A tiny Qwen2 whose layers are exactly the identity, except ``copy_layer``.

    Every query is zero, so attention is uniform over the prefix; every MLP and every attention
    output but ``copy_layer``'s is zero. The residual at a position is then its token embedding
    (the system prompt cannot reach it) until ``copy_layer`` adds the mean over the prefix —
    which contains the system prompt — and the later layers carry that along unchanged.
    """
    model = tiny_model("qwen2", num_hidden_layers=num_layers)
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            layer.self_attn.q_proj.weight.zero_()
            layer.self_attn.q_proj.bias.zero_()
            layer.mlp.down_proj.weight.zero_()
            if i == copy_layer:
                layer.self_attn.o_proj.weight.mul_(10)
            else:
                layer.self_attn.o_proj.weight.zero_()
    return model


@pytest.fixture(scope="module")
def blind(tok):
    return analyze_model(known_model(None), tok, builtin_examples(), CFG)


@pytest.fixture(scope="module")
def copier(tok):
    return analyze_model(known_model(5), tok, builtin_examples(), CFG)


def test_builtin_rules_are_followed_and_checkable(tmp_path):
    examples = builtin_examples()
    assert len(examples) == 128 and {e.rule_id for e in examples} == set(RULES)
    assert all(RULES[e.rule_id].check(e.response) for e in examples)
    # the checks discriminate: most responses break most other rules
    broken = sum(not RULES[r].check(e.response) for e in examples for r in RULES if r != e.rule_id)
    assert broken > 0.6 * len(examples) * (len(RULES) - 1)
    write_jsonl(examples[:5], tmp_path / "rules.jsonl")
    assert read_jsonl(tmp_path / "rules.jsonl") == examples[:5]


def test_bad_rows_are_reported(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"rule_id": "a", "system": "s", "neutral_system": "n", "user": "u"}\n')
    with pytest.raises(ValueError, match="row 1.*response"):
        read_jsonl(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_jsonl(path)


def test_layers_that_ignore_the_system_prompt(blind):
    c = blind["curves"]
    assert c["system_prompt_effect"]["mean"] == [0.0] * 8
    assert c["rule_probe_accuracy"] == [c["rule_probe_chance"]] * 8
    assert c["rule_probe_chance"] == pytest.approx(1 / 8)
    assert c["patching_drop"]["mean"] == [0.0] * 8
    assert blind["recommended_placement"] is None


def test_uniform_attention_gives_the_uniform_share(blind):
    c = blind["curves"]  # zero queries: every layer attends uniformly over the prefix
    assert c["system_attention"]["mean"] == pytest.approx(
        [c["system_attention_uniform"]] * 8, abs=1e-5
    )


def test_system_share_counts_only_system_keys(tok):
    rule, _ = encode_pair(tok, builtin_examples()[0], torch.device("cpu"))
    t = rule.input_ids.shape[1]
    on_system = rule.system_mask[0].float().expand(2, t, t)  # (H, T, T): mass on system keys
    assert float(system_share((on_system / on_system.sum(-1, keepdim=True))[None], rule)) == 1.0
    elsewhere = (~rule.system_mask[0]).float().expand(2, t, t)
    assert float(system_share((elsewhere / elsewhere.sum(-1, keepdim=True))[None], rule)) == 0.0
    assert 0 < uniform_share(rule) < 1


def test_a_layer_that_copies_the_rule_is_found(copier):
    c = copier["curves"]
    effect = c["system_prompt_effect"]["mean"]
    assert effect[:5] == [0.0] * 5 and min(effect[5:]) > 0.05
    assert c["rule_probe_accuracy"][:5] == [c["rule_probe_chance"]] * 5
    assert min(c["rule_probe_accuracy"][5:]) >= 0.9
    # patching after the copy layer removes everything the system prompt did; before, nothing
    assert c["patching_fraction"][:5] == pytest.approx([0.0] * 5, abs=1e-6)
    assert c["patching_fraction"][5:] == pytest.approx([1.0] * 3, abs=1e-3)
    assert copier["recommended_layers"][0] == 5
    assert copier["evidence"]["system_prompt_effect"]["onset_layer"] == 5
    assert copier["evidence"]["rule_probe"]["onset_layer"] == 5


def test_deterministic_for_a_seed(tok):
    cfg = AnalysisConfig(max_examples=32, progress=False, seed=3)
    runs = [
        analyze_model(tiny_model("qwen2", num_hidden_layers=4), tok, builtin_examples(), cfg)
        for _ in range(2)
    ]
    assert json.dumps(runs[0]) == json.dumps(runs[1])


def test_identity_adapter_changes_nothing_and_writes_nothing(tok):
    examples = builtin_examples()
    base = analyze_model(tiny_model("qwen2", num_hidden_layers=4), tok, examples, CFG)
    wrapped = calyrex.wrap(
        tiny_model("qwen2", num_hidden_layers=4), calyrex.CalyrexConfig(placement="late_half")
    )
    at_init = analyze_model(wrapped, tok, examples, CFG)
    assert at_init["curves"] == base["curves"]
    assert at_init["blocks"]["layers"] == [2, 3]
    assert at_init["blocks"]["output_norm"]["mean"] == [0.0, 0.0]


def test_block_attention_entropy(tok):
    wrapped = randomize(
        calyrex.wrap(
            tiny_model("qwen2", num_hidden_layers=4), calyrex.CalyrexConfig(placement="late_half")
        )
    )
    blocks = analyze_model(wrapped, tok, builtin_examples(), CFG)["blocks"]
    assert min(blocks["output_norm"]["mean"]) > 0
    # relative: over the residual's norm, which is not 1 here
    assert blocks["relative_output_norm"]["mean"] != blocks["output_norm"]["mean"]
    assert all(0 < e < 1 for e in blocks["attention_entropy_normalized"]["mean"])
    with torch.no_grad():  # zero queries: uniform over the span, normalised entropy exactly 1
        for block in wrapped.cal_blocks.values():
            block.cal_q_proj.weight.zero_()
    blocks = analyze_model(wrapped, tok, builtin_examples(), CFG)["blocks"]
    assert blocks["attention_entropy_normalized"]["mean"] == pytest.approx([1.0, 1.0], abs=1e-5)


def test_noise_is_not_a_band():
    noise = {"mean": [0.001, -0.002, 0.003, 0.0], "std": [0.05] * 4}
    curves = {
        "system_prompt_effect": noise,
        "rule_probe_accuracy": [0.2, 0.1, 0.25, 0.2],
        "rule_probe_chance": 0.125,
        "rule_probe_test_size": 16,
        "system_attention": noise,
        "patching_drop": noise,
    }
    assert recommend(curves, 4, count=64)["recommended_placement"] is None


def test_recommendation_follows_the_curves():
    def curves(profile):
        flat = {"mean": [0.0] * len(profile), "std": [0.01] * len(profile)}
        return {
            "system_prompt_effect": {"mean": profile, "std": [0.1] * len(profile)},
            "rule_probe_accuracy": [0.5] * len(profile),
            "rule_probe_chance": 0.5,
            "rule_probe_test_size": 32,
            "system_attention": flat,
            "patching_drop": {"mean": profile, "std": [0.1] * len(profile)},
        }

    late = recommend(curves([0.0] * 23 + [1.0] * 5), 28, count=100)
    assert late["recommended_placement"] == "late8th" and late["recommended_layers"] == [
        23,
        24,
        25,
        26,
        27,
    ]
    early = recommend(curves([1.0] * 5 + [0.0] * 23), 28, count=100)
    assert early["recommended_placement"] == "first8th"
    mid = recommend(curves([0.0] * 12 + [1.0] * 5 + [0.0] * 11), 28, count=100)
    assert (
        mid["recommended_placement"] == "mid8th"
        and mid["evidence"]["patching_drop"]["band_mass_share"] == 1.0
    )
    reads = curves([0.0] * 28)  # only the attention to the system span varies with depth
    reads["system_attention"] = {"mean": [0.1] * 12 + [0.3] * 5 + [0.1] * 11, "std": [0.05] * 28}
    assert recommend(reads, 28, count=100)["recommended_layers"] == [12, 13, 14, 15, 16]


def test_cli_end_to_end(tmp_path, tok, capsys):
    model_dir, out = tmp_path / "model", tmp_path / "out"
    tiny_model("qwen2", num_hidden_layers=4).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    adapter = randomize(
        calyrex.wrap(
            tiny_model("qwen2", num_hidden_layers=4), calyrex.CalyrexConfig(placement="last")
        )
    )
    adapter.save_adapter(tmp_path / "adapter")
    argv = [
        "analyze",
        "--model",
        str(model_dir),
        "--out",
        str(out),
        "--max-examples",
        "32",
        "--no-progress",
    ]
    assert main([*argv, "--adapter", str(tmp_path / "adapter")]) == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "analysis.json").read_text())
    assert "analysis.json" in printed and (out / "analysis.png").stat().st_size > 10_000
    assert result["num_layers"] == 4 and result["num_examples"] == 32
    for name in ("system_prompt_effect", "system_attention", "patching_drop"):
        assert len(result["curves"][name]["mean"]) == 4
    assert len(result["curves"]["rule_probe_accuracy"]) == 4
    assert result["blocks"]["layers"] == [3]
    assert f"recommended placement: {result['recommended_placement']}" in printed


def test_ruleworld_backbone_gets_ruleworld_rules(tmp_path, tok):
    from calyrex.analysis import analyze
    from calyrex.research.ruleworld import ORDER
    from calyrex.research.ruleworld.analysis import analysis_examples as ruleworld_examples

    examples = ruleworld_examples(seed=0)
    assert examples == ruleworld_examples(seed=0) and len(examples) == 16 * len(ORDER)
    assert {e.rule_id for e in examples} == set(ORDER)
    assert all(e.system != e.neutral_system and e.response for e in examples)
    model_dir = tmp_path / "model"  # a RuleWorld backbone is recognised by its ruleworld.json
    tiny_model("qwen2", num_hidden_layers=2).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    (model_dir / "ruleworld.json").write_text('{"seed": 0}')
    result = analyze(str(model_dir), str(tmp_path / "out"), max_examples=36, progress=False)
    assert result["data"] == "ruleworld:0" and result["rules"] == sorted(ORDER)


def test_a_lora_adapter_is_measured_as_it_runs(tmp_path, tok):
    """A LoRA model is analysed through the adapter contract, unmerged: its decoder layers are
    hooked under the adapter and its curves differ from the base model's."""
    model_dir = tmp_path / "model"
    tiny_model("qwen2", num_hidden_layers=2).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    lora = calyrex.adapt(tiny_model("qwen2", num_hidden_layers=2), method="lora", seed=0)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.2)
    lora.save_adapter(tmp_path / "lora")
    loaded, _ = calyrex.load_model(str(model_dir), str(tmp_path / "lora"), "float32", "cpu")
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, lora.eval()(ids).logits)
    cfg = AnalysisConfig(max_examples=16, progress=False)
    result = analyze_model(loaded, tok, builtin_examples(), cfg)
    assert len(result["curves"]["rule_probe_accuracy"]) == 2 and result["blocks"] is None
    base, _ = calyrex.load_model(str(model_dir), None, "float32", "cpu")
    plain = analyze_model(base, tok, builtin_examples(), cfg)
    assert result["curves"]["patching_drop"]["mean"] != plain["curves"]["patching_drop"]["mean"]


def test_running_stat_is_the_sample_mean_and_spread():
    from calyrex.analysis.stats import RunningStat

    stat = RunningStat()
    for x in ([1.0, 10.0], [2.0, 10.0], [3.0, 10.0], [4.0, 10.0]):
        stat.add(torch.tensor(x))
    assert stat.to_dict() == {"mean": [2.5, 10.0], "std": [round((5 / 3) ** 0.5, 6), 0.0]}


def test_the_probes_split_holds_out_each_rule_and_its_chance_is_the_majority():
    from calyrex.analysis.probe import probe_accuracy, stratified_split

    labels = [0] * 8 + [1] * 4 + [2]  # a rule seen once only trains
    train, test = stratified_split(labels, 0.25, seed=0)
    assert sorted(train + test) == list(range(13)) and 12 not in test
    assert sorted(labels[i] for i in test) == [0, 0, 1]
    assert stratified_split(labels, 0.25, seed=0) == (train, test)
    assert {tuple(stratified_split(labels, 0.25, seed=s)[1]) for s in range(6)} != {tuple(test)}
    features = torch.randn(13, 2, 3, generator=torch.Generator().manual_seed(0))
    _, chance, size = probe_accuracy(features, labels, 0.25, seed=0)
    assert (chance, size) == (round(2 / 3, 6), 3)


def test_the_band_is_the_earliest_of_equal_windows_and_onset_is_half_the_maximum():
    from calyrex.analysis.recommend import band_width, best_band, onset

    assert [band_width(n) for n in (2, 8, 28, 30)] == [2, 2, 5, 5]
    assert best_band([0, 1, 1, 0, 1, 1, 0], 2) == [1, 2]  # two equal windows: the earliest
    assert onset([0.1, 0.4, 0.5, 1.0]) == 2 and onset([0.0, 0.2]) is None


def test_the_uniform_share_is_the_causal_prefixs(tok):
    """Uniform causal attention from position p spreads over p + 1 keys: the system span's
    share there is the span tokens among them."""
    rule, _ = encode_pair(tok, builtin_examples()[0], torch.device("cpu"))
    span = rule.system_mask[0].float()
    expected = [float(span[: p + 1].sum()) / (p + 1) for p in rule.positions.tolist()]
    assert uniform_share(rule) == pytest.approx(sum(expected) / len(expected), abs=1e-6)
    assert (rule.positions + 1).tolist() == torch.nonzero(
        torch.tensor(
            calyrex.encode_chat(tok, [builtin_examples()[0].conversation(False)], with_labels=True)[
                "labels"
            ][0]
            != -100
        )
    ).flatten().tolist()  # each position predicts the next token, the response's


def test_the_probe_is_scored_on_held_out_examples():
    """Noise with more features than examples: a probe fits its training split perfectly and
    knows nothing, so only a held-out score stays near chance."""
    from calyrex.analysis.probe import probe_accuracy

    g = torch.Generator().manual_seed(0)
    labels = [i % 4 for i in range(64)]
    noise = torch.randn(64, 1, 256, generator=g)
    accuracy, chance, _ = probe_accuracy(noise, labels, 0.25, seed=0)
    assert accuracy[0] < chance + 0.35


def test_a_rule_without_system_prompt_tokens_is_refused(tok):
    """An empty system prompt leaves the span empty: nothing to measure, refused by name."""
    from dataclasses import replace

    example = replace(builtin_examples()[0], system="", neutral_system="")
    with pytest.raises(ValueError, match="rule 'capitals': no system prompt tokens"):
        encode_pair(tok, example, torch.device("cpu"))


def test_span_attention_and_its_entropy_count_only_the_visible_keys():
    """Attention probabilities are 0 on keys a query may not see, and the normalised entropy
    divides by log(#visible keys): uniform over 2 of 4 keys is 1, not 0.5."""
    from types import SimpleNamespace

    from calyrex.analysis.blocks import entropy, span_attention

    block = SimpleNamespace(
        cal_attn_norm=lambda h: h,
        cal_q_proj=lambda x: torch.zeros(x.shape[0], 2),  # zero queries: uniform scores
        heads=1,
        kv_heads=1,
        head_dim=2,
    )
    keys = torch.randn(1, 4, 2)  # (Hkv, S, Dh)
    visible = torch.tensor([[True, True, False, False]])  # one query sees the first two keys
    probs = span_attention(block, torch.zeros(1, 3, 2), keys, visible, torch.tensor([2]))
    assert probs.tolist() == [[[0.5, 0.5, 0.0, 0.0]]]
    nats, normalised = entropy(probs, visible)
    assert nats == pytest.approx(math.log(2)) and normalised == pytest.approx(1.0)


def test_the_analysis_gives_the_model_back_as_it_was(tok):
    """Eager attention (for the weights) and eval mode only while it runs."""
    model = tiny_model("qwen2", num_hidden_layers=2, attn_implementation="sdpa").train()
    analyze_model(model, tok, builtin_examples(), AnalysisConfig(max_examples=16, progress=False))
    assert model.config._attn_implementation == "sdpa" and model.training


def test_a_sure_but_negligible_rise_locates_nothing():
    """A rise far above its standard errors but under its measure's floor (1 % of the residual)
    says nothing about where."""
    from calyrex.analysis.recommend import FLOORS

    tiny = {"mean": [0.0, 0.0, 0.5 * FLOORS["system_prompt_effect"]] * 2, "std": [1e-6] * 6}
    flat = {"mean": [0.0] * 6, "std": [0.0] * 6}
    curves = {
        "system_prompt_effect": tiny,
        "rule_probe_accuracy": [0.25] * 6,
        "rule_probe_chance": 0.25,
        "rule_probe_test_size": 16,
        "system_attention": flat,
        "patching_drop": flat,
    }
    assert recommend(curves, 6, count=1000)["recommended_placement"] is None


def test_the_system_prompt_effect_is_relative_to_the_residual(tok):
    """The effect at a layer: how far the rule's run is from the neutral one, over the rule
    run's residual norm, averaged over the response positions and then the examples."""
    from calyrex.analysis.capture import capture

    model = known_model(5, num_layers=6).eval()
    kept = sorted({e.rule_id for e in builtin_examples()})[:2]  # two rules, two examples each
    examples = [e for e in builtin_examples() if e.rule_id in kept]
    examples = [e for r in kept for e in [x for x in examples if x.rule_id == r][:2]]
    result = analyze_model(model, tok, examples, AnalysisConfig(progress=False))
    expected = torch.zeros(6, dtype=torch.float64)
    for ex in examples:
        rule, neutral = encode_pair(tok, ex, torch.device("cpu"))
        r, n = capture(model, rule).hidden, capture(model, neutral).hidden  # (L, n, D)
        expected += ((r - n).norm(dim=-1) / r.norm(dim=-1)).mean(-1).double() / len(examples)
    effect = result["curves"]["system_prompt_effect"]["mean"]
    assert effect == pytest.approx(expected.tolist(), abs=1e-5) and max(effect) > 0.05


def test_one_rule_is_refused_before_any_forward(tok):
    one = [e for e in builtin_examples() if e.rule_id == builtin_examples()[0].rule_id]
    with pytest.raises(ValueError, match="at least two different rules"):
        analyze_model(tiny_model("qwen2", num_hidden_layers=2), tok, one, CFG)
