"""``calyrex bench``'s figures from known inputs: the FLOP model's counts worked by hand from its
stated rules, each ratio's direction and unit with the clocks replaced by fixed times, the
headline summary and the printed tables. ``test_bench`` runs the benchmark end to end and checks
the FLOP model against torch's counter on a prefill and a decode step."""

from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

import calyrex
from calyrex.adapters.baselines import cal_budget
from calyrex.backbones.tiny import tiny_model
from calyrex.bench import flops, inference, report, run, train
from calyrex.bench.measure import median_time

# D 4, L 3, H 2, Hkv 1, Dh 2, I 8, V 10
G = flops.Geometry(hidden=4, layers=3, heads=2, kv_heads=1, head_dim=2, ffn=8, vocab=10)
CAL = SimpleNamespace(num_heads=2, num_kv_heads=1, head_dim=2, intermediate_size=3, layers=[1, 2])


def test_a_geometry_reads_grouped_query_attention_and_a_models_own_head_dim():
    config = SimpleNamespace(
        num_attention_heads=8, num_key_value_heads=2, hidden_size=64, head_dim=16,
        intermediate_size=96, vocab_size=100, num_hidden_layers=5,
    )  # fmt: skip
    g = flops.Geometry.of(config)
    assert (g.heads, g.kv_heads, g.head_dim) == (8, 2, 16)
    del config.num_key_value_heads, config.head_dim  # a config without them: the defaults
    assert (flops.Geometry.of(config).kv_heads, flops.Geometry.of(config).head_dim) == (8, 8)


def test_the_forward_counts_follow_their_rules():
    assert flops.causal_pairs(5) == 15 and flops.causal_pairs(1, past=5) == 6
    assert flops.layer_linear(G, 5) == 2 * 5 * 4 * (2 * 2 * 2 + 2 * 1 * 2 + 3 * 8)  # 1440
    assert flops.attention_core(G, 15) == 4 * 15 * 2 * 2  # 240
    assert flops.head(G, 2) == 2 * 2 * 4 * 10  # 160
    # a CAL block: W_Q, W_O and its FFN over T = 5, W_K, W_V over the span S = 3; 5·3 pairs
    qo, kv, ffn = 2 * 2 * 5 * 4 * 2 * 2, 2 * 2 * 3 * 4 * 1 * 2, 2 * 3 * 5 * 4 * 3
    assert flops.cal_linear(G, CAL, 5, 3) == qo + kv + ffn
    assert flops.cal_forward(G, CAL, 5, 3) == qo + kv + ffn + 4 * 5 * 3 * 2 * 2
    # a decode step: its span keys and values are cached, not projected again
    step_qo, step_ffn = 2 * 2 * 1 * 4 * 2 * 2, 2 * 3 * 1 * 4 * 3
    assert flops.cal_forward(G, CAL, 1, 3, kv_cached=True) == step_qo + step_ffn + 4 * 3 * 2 * 2


def test_the_inference_ratio_computes_the_logits_at_the_last_position_only():
    base = 3 * (1440 + 240) + 160 // 2  # three layers, the head over one position
    blocks = 2 * flops.cal_forward(G, CAL, 5, 3)
    assert flops.inference_ratio(G, CAL, 5, 3) == pytest.approx((base + blocks) / base)


def test_a_training_step_backs_up_from_the_first_adapter_or_through_every_layer_for_lora():
    """Layer forward 1440 + 240, backward 1440 + 2 × 240 (the projections' input gradients, the
    attention core twice); the head 160 over 2 labelled positions both ways; the adapters'
    forward 100 and its backward 200 (input and weight gradients)."""
    forward = 3 * (1440 + 240) + 100 + 160
    backward_from_layer_1 = 1 * (1440 + 480) + 200 + 160  # host layer 2 only
    assert flops.train_step(G, "calyrex", {"first": 1, "fwd": 100}, 5, 2) == (
        forward + backward_from_layer_1
    )
    every_layer = 3 * (1440 + 480) + 200 + 160
    assert flops.train_step(G, "lora", {"first": 0, "fwd": 100}, 5, 2) == forward + every_layer


# --- training: what each method's adapter costs and how the ratios are taken ------------------


CASE = train.TrainCase(batch=2, tokens=24, system=6, labelled=4, steps=1, warmup=0)


@pytest.mark.parametrize("method", ["calyrex", "parallel_mlp", "lora"])
def test_each_methods_adapter_flops(method):
    backbone = tiny_model("qwen2", num_hidden_layers=8)
    cal = calyrex.CalyrexConfig(placement="late_half")
    g = flops.Geometry.of(backbone.config)
    model = calyrex.adapt(backbone, method, cal, seed=0)
    got = train._adapter_flops(model, method, g, CASE)
    if method == "lora":
        assert got == {"first": 0, "fwd": 2 * 24 * calyrex.count_trainable(model)}
        return
    cfg = model.adapter_config
    per = (
        flops.cal_forward(g, cfg, 24, 6)
        if method == "calyrex"
        else 2 * 3 * 24 * g.hidden * cfg.intermediate_size
    )
    assert got == {"first": min(cfg.layers), "fwd": len(cfg.layers) * per}
    assert min(cfg.layers) < max(cfg.layers)


def test_a_methods_row_counts_the_whole_batch(monkeypatch):
    monkeypatch.setattr(train, "median_time", lambda fn, device, repeats, warmup: 0.5)
    monkeypatch.setattr(train, "peak_bytes", lambda fn, device: 1000)
    backbone = tiny_model("qwen2", num_hidden_layers=8)
    cal = calyrex.CalyrexConfig(placement="late_half")
    row = train.measure_method(backbone, "lora", cal, CASE, torch.device("cpu"))
    assert row["tokens_per_s"] == 2 * 24 / 0.5
    g = flops.Geometry.of(backbone.config)
    adapter = {"first": 0, "fwd": 2 * 24 * row["trainable"]}
    assert row["flops"] == 2 * flops.train_step(g, "lora", adapter, 24, 4)


def test_the_training_ratios_are_the_method_over_lora(monkeypatch):
    rows = {
        "calyrex": {"step_s": 3.0, "activation_bytes": 50, "flops": 10},
        "parallel_mlp": {"step_s": 1.0, "activation_bytes": 100, "flops": 30},
        "lora": {"step_s": 2.0, "activation_bytes": 200, "flops": 40},
    }
    monkeypatch.setattr(train, "measure_method", lambda backbone, m, cal, case, device: rows[m])
    out = train.run(None, None, CASE, torch.device("cpu"))
    assert out["calyrex_time_ratio_vs_lora"] == 1.5
    assert out["calyrex_activation_memory_ratio_vs_lora"] == 0.25
    assert out["parallel_mlp_flop_ratio_vs_lora"] == 0.75
    summary = run._summary({"train": out})
    assert summary["train_time_ratio_vs_lora"] == 1.5
    assert summary["train_flop_ratio_vs_lora"] == 0.25


# --- inference --------------------------------------------------------------------------------


def test_the_inference_figures_take_their_ratios_the_right_way_up(monkeypatch):
    monkeypatch.setattr(inference, "_alternate", lambda b, cal, r, fn: {"base": 2, "calyrex": 4})
    backbone = tiny_model("qwen2", num_hidden_layers=8)
    cal = calyrex.CalyrexConfig(placement="late_half")
    case = inference.InferenceCase(
        system=6, conversation=10, decode_steps=5, repeats=1, contexts=[]
    )
    got = inference.prefill_decode(backbone, cal, case, torch.device("cpu"))
    tokens = 3 + 6 + 10
    assert got["prefill_tokens_per_s"] == {"base": tokens / 2, "calyrex": tokens / 4}
    assert got["decode_tokens_per_s"] == {"base": 5 / 2, "calyrex": 5 / 4}
    assert got["prefill_ratio_vs_base"] == got["decode_ratio_vs_base"] == 0.5  # half the speed
    g, resolved = flops.Geometry.of(backbone.config), cal.resolve(backbone.config)
    decode = flops.inference_ratio(g, resolved, 1, 6, past=tokens)
    assert got["decode_flop_ratio_vs_base"] == decode != flops.inference_ratio(g, resolved, 1, 6)
    summary = run._summary({"inference": got})
    assert summary["decode_flop_ratio_vs_base"] == decode


@pytest.mark.parametrize("tied", [True, False])
def test_the_weights_a_decode_step_reads_count_the_embedding_once(tied):
    backbone = tiny_model("qwen2", num_hidden_layers=8, tie_word_embeddings=tied)
    cal = calyrex.CalyrexConfig(placement="late_half")
    total = sum(p.numel() for p in backbone.parameters())  # a tied matrix is one parameter
    read = total if tied else total - backbone.get_input_embeddings().weight.numel()
    want = (read + cal_budget(backbone, cal)) / read
    assert inference._weight_ratio(backbone, cal) == pytest.approx(want)


def test_decode_time_against_context_is_per_step_and_skips_contexts_inside_the_prompt(
    monkeypatch,
):
    monkeypatch.setattr(inference, "_alternate", lambda b, cal, r, fn: {"base": 2, "calyrex": 3})
    backbone = tiny_model("qwen2", num_hidden_layers=8)
    cal = calyrex.CalyrexConfig(placement="late_half")
    case = inference.InferenceCase(system=6, conversation=0, decode_steps=4, repeats=1,
                                   contexts=[4, 32])  # fmt: skip
    rows = inference.decode_vs_context(backbone, cal, case, torch.device("cpu"))
    assert [r["context"] for r in rows] == [32]  # 4 < the 9-token prompt: nothing to measure
    assert rows[0]["added_step_s"] == 0.25 and rows[0]["base_step_s"] == 0.5


# --- printing and timing ------------------------------------------------------------------------


def test_the_tables_print_each_ratio_and_its_limit():
    methods = {
        "calyrex": {"trainable": 10, "step_s": 3.0, "tokens_per_s": 1, "activation_bytes": 2**20,
                    "flops": 20},
        "lora": {"trainable": 10, "step_s": 2.0, "tokens_per_s": 1, "activation_bytes": 4 * 2**20,
                 "flops": 40},
    }  # fmt: skip
    case = {"batch": 1, "tokens": 8, "system": 2, "labelled": 2, "steps": 1}
    inference_ = {
        "tokens": 8, "system": 2, "decode_steps": 2,
        "prefill_tokens_per_s": {"base": 10.0, "calyrex": 8.0},
        "decode_tokens_per_s": {"base": 5.0, "calyrex": 4.0},
        "prefill_ratio_vs_base": 0.8, "decode_ratio_vs_base": 0.8, "flop_ratio_vs_base": 1.25,
        "decode_flop_ratio_vs_base": 1.6, "weight_ratio_vs_base": 2.0, "decode_vs_context": [],
    }  # fmt: skip
    console = Console(width=200, record=True)
    console.print(report._train({"case": case, "methods": methods}))
    for table in report._inference(inference_):
        console.print(table)
    text = console.export_text()
    calyrex_row = next(line for line in text.splitlines() if "calyrex" in line and "│" in line)
    assert "1.500" in calyrex_row and "0.250" in calyrex_row  # time and memory ×LoRA
    assert "0.500" in calyrex_row  # FLOP ×LoRA
    prefill = next(line for line in text.splitlines() if "prefill" in line)
    assert "0.800" in prefill and "1.250" not in prefill  # the limit a 1.25× FLOP ratio sets
    decode = next(line for line in text.splitlines() if line.strip("│ ").startswith("decode"))
    assert "0.625" in decode and "0.500" in decode  # 1 / 1.6 and 1 / 2.0


def test_a_median_of_no_repeats_still_times_one_call():
    calls = []
    assert median_time(lambda: calls.append(1), torch.device("cpu"), repeats=0, warmup=2) >= 0
    assert len(calls) == 3  # two warm-up calls, one timed
