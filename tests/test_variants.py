"""CALYREX variants of the RuleWorld study (issue 14): attention-only blocks (``ffn=False``) and
the host-attention gate (``host_gate=True``, not the paper's method). Each keeps the core
properties: identity at init, no change without a system prompt, cache ≡ no cache, batch ≡ one
by one, gradients only in adapter parameters, save → load → identical outputs."""

import pytest
import torch
from transformers import DynamicCache

import calyrex
from calyrex.adapters.baselines import cal_budget
from calyrex.backbones.tiny import tiny_model
from calyrex.core.block import HostGate
from calyrex.core.mask import span_key_flags
from conftest import CONVS, encode, logits, randomize

VARIANTS = {
    "attention-only": dict(ffn=False),
    "host-gate": dict(host_gate=True),
}
GREEDY = dict(max_new_tokens=6, do_sample=False)


def _wrapped(tok, attn="sdpa", **block):
    cfg = calyrex.CalyrexConfig(placement="late_half", **block)
    return calyrex.wrap(
        tiny_model("qwen2", num_hidden_layers=8, attn_implementation=attn), cfg, tokenizer=tok
    )


def _without_gate(model):
    """The same blocks with the host gate's bias forced to 0 (its projection zeroed)."""
    with torch.no_grad():
        for block in model.cal_blocks.values():
            block.cal_host_gate.cal_gate_proj.weight.zero_()
    return model


def test_span_key_flags_marks_absolute_span_positions():
    pos = torch.tensor([[2, 3, 4], [1, 0, 0]])
    valid = torch.tensor([[True, True, True], [True, False, False]])
    got = span_key_flags(pos, valid, 6)
    assert got.tolist() == [[0, 0, 1, 1, 1, 0], [0, 1, 0, 0, 0, 0]]
    assert span_key_flags(pos, valid, 3).tolist() == [[0, 0, 1], [0, 1, 0]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_identity_at_init_is_bit_exact(tok, variant):
    base = tiny_model("qwen2", num_hidden_layers=8)
    wrapped = _wrapped(tok, **VARIANTS[variant])
    for side in ("left", "right"):
        batch = encode(tok, side=side)
        real = batch["attention_mask"].bool()  # (B, T)
        # every real token is bit-exact; a left-pad query attends to nothing, and SDPA gives it
        # 0 under a bool mask but the mean of the values under an additive one (HF's own
        # position_bias path): values no real token or generated token ever reads
        assert torch.equal(logits(base, batch)[real], logits(wrapped, batch)[real])
    batch = encode(tok, side="left")
    plain = {k: v for k, v in batch.items() if k != "system_mask"}
    kw = dict(GREEDY, pad_token_id=tok.pad_token_id)
    assert torch.equal(base.generate(**plain, **kw), wrapped.generate(**batch, **kw))


def test_variant_names_the_fields_that_depart_from_the_paper():
    assert calyrex.CalyrexConfig().variant() == []
    both = calyrex.CalyrexConfig(ffn=False, host_gate=True)
    assert both.variant() == ["ffn=False", "host_gate=True"]


def test_attention_only_blocks_have_no_ffn(tok):
    wrapped = _wrapped(tok, ffn=False)
    names = [n for b in wrapped.cal_blocks.values() for n, _ in b.named_parameters()]
    assert names and not any("cal_ffn" in n for n in names)
    full = cal_budget(wrapped.base, calyrex.CalyrexConfig(placement="late_half"))
    assert calyrex.count_trainable(wrapped) < full


def test_host_gate_parameters_are_counted_and_small(tok):
    wrapped = _wrapped(tok, host_gate=True)
    cfg = calyrex.CalyrexConfig(placement="late_half", host_gate=True)
    assert calyrex.count_trainable(wrapped) == cal_budget(wrapped.base, cfg)
    hidden, heads = wrapped.base.config.hidden_size, wrapped.base.config.num_attention_heads
    plain = cal_budget(wrapped.base, calyrex.CalyrexConfig(placement="late_half"))
    assert cal_budget(wrapped.base, cfg) - plain == len(cfg.resolve(wrapped.base.config).layers) * (
        hidden + hidden * heads
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_rows_without_system_prompt_equal_base(tok, variant):
    base = tiny_model("qwen2", num_hidden_layers=8)
    wrapped = randomize(_wrapped(tok, **VARIANTS[variant]))
    for side in ("left", "right"):
        batch = encode(tok, side=side)
        want, got = logits(base, batch), logits(wrapped, batch)
        real = batch["attention_mask"].bool()
        assert torch.equal(got[1][real[1]], want[1][real[1]])  # no system prompt in this row
        first = int(batch["system_mask"][0].float().argmax())
        before = real[0, :first]  # the template header before the span
        assert torch.equal(got[0, :first][before], want[0, :first][before])
        assert not torch.allclose(got[0, first:], want[0, first:])


def test_host_gate_acts_only_through_the_host_attention(tok):
    gated = randomize(_wrapped(tok, host_gate=True))
    ungated = _without_gate(randomize(_wrapped(tok, host_gate=True)))
    batch = encode(tok)
    a, b = logits(gated, batch), logits(ungated, batch)
    assert torch.equal(a[1], b[1])  # right padding: pad queries come last and see real keys
    first = int(batch["system_mask"][0].float().argmax())
    assert torch.equal(a[0, :first], b[0, :first])
    assert not torch.allclose(a[0, first:], b[0, first:])


def test_host_gate_bias_falls_on_keys_outside_the_span_only():
    """β (per query and head) on every key outside the span; 0 on span keys and on queries
    that see no span key."""
    gen = torch.Generator().manual_seed(0)
    gate = HostGate(hidden=8, host_heads=2, eps=1e-6)
    with torch.no_grad():
        gate.cal_gate_proj.weight.normal_(generator=gen)
    x = torch.randn(1, 4, 8, generator=gen)  # (B, T, D)
    has_key = torch.tensor([[False, True, True, True]])  # (B, T)
    span_keys = torch.tensor([[False, True, True, False, False]])  # (B, K): span at keys 1-2
    bias = gate(x, has_key, span_keys)  # (B, Hh, T, K)
    with torch.no_grad():
        beta = gate.cal_gate_proj(gate.cal_gate_norm(x))  # (B, T, Hh)
    assert bias.shape == (1, 2, 4, 5)
    for h in range(2):
        for t in range(4):
            for k in range(5):
                want = beta[0, t, h] if t > 0 and k in (0, 3, 4) else 0.0
                assert bias[0, h, t, k].item() == pytest.approx(float(want)), (h, t, k)
    assert (beta[0, 1:] != 0).all()  # the check above is not of zeros alone


@pytest.mark.parametrize("variant", VARIANTS)
def test_batch_equals_one_by_one_and_left_equals_right(tok, variant):
    wrapped = randomize(_wrapped(tok, **VARIANTS[variant]))
    out_l, out_r = logits(wrapped, encode(tok, side="left")), logits(wrapped, encode(tok))
    for b, conv in enumerate(CONVS):
        single = logits(wrapped, encode(tok, [conv]))[0]
        n = single.shape[0]
        torch.testing.assert_close(out_r[b, :n], single, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out_l[b, -n:], single, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cache_equals_no_cache_and_chunked_prefill(tok, variant):
    wrapped = randomize(_wrapped(tok, **VARIANTS[variant]))
    batch = encode(tok, side="left")
    kw = dict(GREEDY, pad_token_id=tok.pad_token_id)
    cached = wrapped.generate(**batch, use_cache=True, **kw)
    assert torch.equal(cached, wrapped.generate(**batch, use_cache=False, **kw))
    assert torch.equal(
        cached, wrapped.generate(**batch, cache_implementation="static", use_cache=True, **kw)
    )
    assert torch.equal(cached, wrapped.generate(**batch, prefill_chunk_size=5, **kw))
    # a prefill in two chunks (the cut inside the first system span) equals one call
    one = encode(tok, [CONVS[0]])
    want = logits(wrapped, one)
    cut = int(one["system_mask"][0].float().argmax()) + 2
    cache = DynamicCache(config=wrapped.config)
    with torch.no_grad():
        first = wrapped(
            input_ids=one["input_ids"][:, :cut],
            attention_mask=one["attention_mask"][:, :cut],
            system_mask=one["system_mask"][:, :cut],
            cache=cache,
            use_cache=True,
        ).logits
        second = wrapped(
            input_ids=one["input_ids"][:, cut:],
            attention_mask=one["attention_mask"],
            system_mask=one["system_mask"][:, cut:],
            cache=cache,
            use_cache=True,
        ).logits
    torch.testing.assert_close(torch.cat([first, second], 1), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_only_in_adapter_parameters(tok, variant):
    wrapped = randomize(_wrapped(tok, **VARIANTS[variant]))
    wrapped.train()
    batch = calyrex.encode_chat(tok, [CONVS[2]] * 2, with_labels=True)
    batch["labels"] = batch["input_ids"].clone()
    wrapped(**batch).loss.backward()
    for name, p in wrapped.named_parameters():
        if calyrex.is_adapter_param(name):
            assert p.grad is not None and p.grad.abs().sum() > 0, name
        else:
            assert p.grad is None, name
    if VARIANTS[variant].get("host_gate"):
        assert any("cal_gate_proj" in n for n, p in wrapped.named_parameters() if p.requires_grad)


@pytest.mark.parametrize("variant", VARIANTS)
def test_save_load_gives_identical_outputs(tok, variant, tmp_path):
    wrapped = randomize(_wrapped(tok, **VARIANTS[variant]))
    calyrex.save_adapter(wrapped, tmp_path / "adapter")
    loaded = calyrex.load_adapter(tiny_model("qwen2", num_hidden_layers=8), tmp_path / "adapter")
    assert loaded.adapter_config.ffn == VARIANTS[variant].get("ffn", True)
    assert loaded.adapter_config.host_gate == VARIANTS[variant].get("host_gate", False)
    batch = encode(tok)
    assert torch.equal(logits(wrapped, batch), logits(loaded, batch))


def test_host_gate_refuses_attention_kernels_that_ignore_it(tok):
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
        _wrapped(tok, attn="eager", host_gate=True)


def test_host_gate_survives_deepcopy_and_pickle(tok):
    import copy
    import io

    wrapped = randomize(_wrapped(tok, host_gate=True))
    batch = encode(tok, side="left")
    want = logits(wrapped, batch)
    clone = copy.deepcopy(wrapped)
    assert torch.equal(logits(clone, batch), want)
    buf = io.BytesIO()
    torch.save(wrapped, buf)
    buf.seek(0)
    assert torch.equal(logits(torch.load(buf, weights_only=False), batch), want)
