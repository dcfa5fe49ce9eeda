"""The benchmark runs end to end on a tiny shape, and what it relies on is correct:
shared system-prompt K/V give the same logits as prefilling every row, the CPU memory meter
counts a known allocation exactly, and the FLOP model reproduces the issue's 18 %."""

import json
import math

import pytest
import torch

import calyrex
from calyrex.backbones.precision import choose
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.bench import flops
from calyrex.bench.command import bench
from calyrex.bench.measure import peak_bytes
from calyrex.bench.shapes import backbone_config
from calyrex.core import hf
from calyrex.core.cal_cache import share_prefix
from conftest import randomize

HEADLINES = (
    "train_time_ratio_vs_lora",
    "train_activation_memory_ratio_vs_lora",
    "prefill_ratio_vs_base",
    "decode_ratio_vs_base",
    "flop_ratio_vs_base",
)


def test_quick_benchmark_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench(quick=True, json=str(out)) == 0
    results = json.loads(out.read_text())
    for key in HEADLINES:
        assert math.isfinite(results[key]) and results[key] > 0, key
    assert {"machine", "shape", "train", "inference", "scaling", "shared"} <= set(results)
    assert results["machine"]["torch"] != "-" and results["shape"]["name"] == "tiny"
    methods = results["train"]["methods"]
    counts = [methods[m]["trainable"] for m in ("calyrex", "lora", "parallel_mlp")]
    assert max(counts) / min(counts) < 1.02  # parameter-matched
    assert all(m["activation_bytes"] > 0 for m in methods.values())
    assert "Training step" in capsys.readouterr().out


TINY_SIZES = dict(  # seconds on a tiny model
    train_batch=1, train_tokens=32, train_system=8, train_labelled=8, train_steps=1,
    system_tokens=8, conversation_tokens=16, decode_steps=2, repeats=1, decode_contexts=[64],
)  # fmt: skip


def test_a_real_model_by_name_is_the_backbone(tmp_path, capsys):
    """--model loads a saved model through the resolver and records it in place of a shape."""
    directory = tmp_path / "tiny-llama"
    tiny_model("llama", num_hidden_layers=8).save_pretrained(directory)
    tiny_tokenizer("llama3").save_pretrained(directory)
    out = tmp_path / "bench.json"
    code = bench(
        model=str(directory), preset="quick", sections=["train", "inference"], dtype="float32",
        json=str(out), **TINY_SIZES,
    )  # fmt: skip
    assert code == 0
    results = json.loads(out.read_text())
    assert "shape" not in results and results["settings"]["shape"] is None
    assert results["model"] == {
        "name": str(directory),
        "path": str(directory),
        "model_type": "llama",
        "hidden_size": 32,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 64,
        "vocab_size": 384,
        "tie_word_embeddings": False,
    }
    assert results["train"]["case"]["tokens"] == 32 and results["inference"]["tokens"] == 27
    for key in HEADLINES:
        assert math.isfinite(results[key]) and results[key] > 0, key
    assert f"model: {directory}" in capsys.readouterr().out


def test_a_model_and_a_shape_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not both"):
        bench(model=str(tmp_path), shape="tiny", quick=True)


def test_auto_dtype_is_resolved_and_recorded(tmp_path, capsys):
    """On CPU ``auto`` is the default; the dtype it picks and why are in the JSON and printed."""
    out = tmp_path / "bench.json"
    assert bench(quick=True, sections=["inference"], json=str(out), **TINY_SIZES) == 0
    results = json.loads(out.read_text())
    picked = choose("cpu")
    assert results["settings"]["dtype"] == "auto"
    assert results["machine"]["precision"] == {
        "asked": "auto", "chosen": picked.precision, "reason": picked.reason
    }  # fmt: skip
    assert results["machine"]["dtype"] == str(picked.dtype).removeprefix("torch.")
    assert f"precision: {picked.precision} (auto: {picked.reason})" in capsys.readouterr().out
    with pytest.raises(ValueError, match="precision must be one of"):
        bench(quick=True, dtype="float8", sections=["inference"])


def test_shared_prompt_equals_prefilling_every_row():
    model = randomize(
        calyrex.wrap(
            tiny_model("qwen2", num_hidden_layers=8), calyrex.CalyrexConfig(placement="late_half")
        )
    )
    g = torch.Generator().manual_seed(0)
    prompt, batch = 12, 3
    ids = torch.randint(0, 384, (batch, prompt + 9), generator=g)
    ids[:, :prompt] = ids[:1, :prompt]  # one system prompt, three conversations
    system_mask = torch.zeros_like(ids, dtype=torch.bool)
    system_mask[:, 3 : prompt - 1] = True
    with torch.no_grad():
        full = model(input_ids=ids, system_mask=system_mask).logits[:, prompt:]
        prefill = model(
            input_ids=ids[:1, :prompt], system_mask=system_mask[:1, :prompt], use_cache=True
        )
        cache = share_prefix(hf.output_cache(prefill), batch)
        store = model.span_kv(cache)
        k, _ = next(iter(store.kv.values()))
        assert k.shape[0] == batch and k.stride(0) == 0  # one copy, viewed per row
        out = model(input_ids=ids[:, prompt:], cache=cache, use_cache=True)
        torch.testing.assert_close(out.logits, full, atol=1e-5, rtol=1e-5)
        step = model(input_ids=ids[:, -1:], cache=hf.output_cache(out), use_cache=True).logits
        again = model(
            input_ids=torch.cat([ids, ids[:, -1:]], 1),
            system_mask=torch.nn.functional.pad(system_mask, (0, 1)),
        ).logits
        torch.testing.assert_close(step[:, -1], again[:, -1], atol=1e-5, rtol=1e-5)


def test_sharing_refuses_a_multi_row_store():
    model = calyrex.wrap(tiny_model("qwen2"), calyrex.CalyrexConfig(placement="last"))
    ids = torch.randint(0, 384, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = model(input_ids=ids, system_mask=torch.ones_like(ids), use_cache=True)
    with pytest.raises(ValueError, match="one-row"):
        share_prefix(hf.output_cache(out), 4)


def test_cpu_memory_meter_counts_a_known_peak():
    def work():
        a = torch.empty(1000, 1000)  # 4 MB
        b = torch.empty(2000, 1000)  # 8 MB, both alive: 12 MB
        del a, b
        c = torch.empty(500, 1000)  # 2 MB after the peak
        del c

    assert peak_bytes(work, torch.device("cpu")) == 12_000_000


def test_cpu_memory_meter_sees_the_backward_pass():
    w = torch.randn(256, 256, requires_grad=True)
    x = torch.randn(512, 256)

    def step():
        torch.tanh(x @ w).sum().backward()  # stores (512, 256) activations, frees them in backward

    assert peak_bytes(step, torch.device("cpu")) >= 512 * 256 * 4
    assert w.grad is not None


def test_flop_model_gives_the_issues_inference_and_training_estimates():
    g = flops.Geometry.of(backbone_config("qwen2.5-1.5b"))
    cfg = calyrex.CalyrexConfig().resolve(backbone_config("qwen2.5-1.5b"))
    assert len(cfg.layers) == 5
    ratio = flops.inference_ratio(g, cfg, tokens=2503, span=500)
    assert 1.12 < ratio < 1.19  # "5 blocks on 28 layers cost about 18 % more FLOPs"
    assert flops.causal_pairs(4) == 10 and flops.causal_pairs(2, past=3) == 2 * 3 + 3


def test_flop_model_equals_torchs_flop_counter_on_a_tiny_model():
    """``flops`` against ``torch.utils.flop_counter.FlopCounterMode`` on the 8-layer tiny Qwen2
    with CAL blocks at late_half: a prefill with a 16-token span and a decode step after it.

    Eager host attention and SDPA's math kernel make every matmul visible to the counter (its
    registry has no formula for the CPU flash kernel). The counter counts what eager computes,
    the full T×T score square; the FLOP model counts the T(T+1)/2 causal pairs, so the prefill
    compares after taking the masked-out half, 4·H·Dh·T(T−1)/2 per layer, off the count. A
    decode step's single query sees every key: there the two agree with no correction."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    t, heads, head_dim, layers = 40, 4, 8, 8
    config = calyrex.CalyrexConfig(placement="late_half")

    def backbone():
        return tiny_model("qwen2", num_hidden_layers=layers, attn_implementation="eager")

    base, model = backbone(), calyrex.wrap(backbone(), config)
    ids = torch.randint(0, 384, (1, t + 1), generator=torch.Generator().manual_seed(0))
    span = torch.zeros_like(ids, dtype=torch.bool)
    span[:, 4:20] = True  # S = 16

    def counted(run):
        with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as c:
            run()
        return c.get_total_flops()

    base_flops = counted(lambda: base(input_ids=ids[:, :t], logits_to_keep=1))
    cal_flops = counted(
        lambda: model(input_ids=ids[:, :t], system_mask=span[:, :t], logits_to_keep=1)
    )
    g, cfg = flops.Geometry.of(base.config), config.resolve(base.config)
    masked = layers * 4 * heads * head_dim * t * (t - 1) // 2
    assert base_flops - masked == flops.base_forward(g, t, logits=1)
    assert cal_flops - base_flops == 4 * flops.cal_forward(g, cfg, t, 16)
    measured = (cal_flops - masked) / (base_flops - masked)
    assert measured == pytest.approx(flops.inference_ratio(g, cfg, t, 16), rel=1e-12)
    assert measured > 1.4  # the blocks are a large share of so small a model

    with torch.no_grad():
        base_cache = hf.output_cache(base(input_ids=ids[:, :t], use_cache=True))
        cal_cache = hf.output_cache(
            model(input_ids=ids[:, :t], system_mask=span[:, :t], use_cache=True)
        )
    step = ids[:, t:]
    base_step = counted(lambda: base(input_ids=step, past_key_values=base_cache, use_cache=True))
    cal_step = counted(lambda: model(input_ids=step, cache=cal_cache, use_cache=True))
    assert base_step == flops.base_forward(g, 1, past=t)
    assert cal_step / base_step == pytest.approx(
        flops.inference_ratio(g, cfg, 1, 16, past=t), rel=1e-12
    )


def test_unmasked_decode_path_equals_the_masked_one():
    """The decode fast path (every query sees every key: no mask, no row kept) changes no number."""
    import copy
    import dataclasses

    model = randomize(
        calyrex.wrap(
            tiny_model("qwen2", num_hidden_layers=8), calyrex.CalyrexConfig(placement="late_half")
        )
    )
    ids = torch.randint(0, 384, (2, 14), generator=torch.Generator().manual_seed(1))
    system_mask = torch.zeros_like(ids, dtype=torch.bool)
    system_mask[:, 3:9] = True
    with torch.no_grad():
        cache = hf.output_cache(
            model(input_ids=ids[:, :-2], system_mask=system_mask[:, :-2], use_cache=True)
        )
        store = copy.deepcopy(model.span_kv(cache))
        span = store.begin(None, past=12, length=2, batch=2)
        assert span.full and not span.empty
        block, layer = next((b, int(i)) for i, b in model.cal_blocks.items())
        h = torch.randn(2, 2, 32)
        fast, new = block(h, span, store.past_kv(layer, span))
        masked, _ = block(h, dataclasses.replace(span, full=False), store.past_kv(layer, span))
        assert new is None  # a decode step brings no span token
        torch.testing.assert_close(fast, masked, atol=1e-6, rtol=1e-6)
        step = model(input_ids=ids[:, -2:], cache=cache, use_cache=True).logits
        full = model(input_ids=ids, system_mask=system_mask).logits[:, -2:]
        torch.testing.assert_close(step, full, atol=1e-5, rtol=1e-5)


def test_readme_bench_tables_come_from_the_result_files():
    """The docs' measured tables are what scripts/readme_bench.py writes from benchmarks/results."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "scripts/readme_bench.py", "--check"], cwd=root)
    assert proc.returncode == 0, "run `python scripts/readme_bench.py` and commit the docs pages"
