"""The core properties of a CALYREX-wrapped model (issue 2)."""

import pytest
import torch

import calyrex
from calyrex.backbones.tiny import tiny_model
from conftest import CONVS, encode, logits, randomize


@pytest.mark.parametrize(
    "arch,tname", [("qwen2", "tok"), ("llama", "llama_tok"), ("mistral", "tok"), ("qwen3", "tok")]
)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_identity_at_init_is_bit_exact(arch, tname, attn, request):
    tok = request.getfixturevalue(tname)
    base = tiny_model(arch, attn_implementation=attn)
    wrapped = calyrex.wrap(
        tiny_model(arch, attn_implementation=attn),
        calyrex.CalyrexConfig(placement="all"),
        tokenizer=tok,
    )
    for side in ("left", "right"):
        batch = encode(tok, side=side)
        assert torch.equal(logits(base, batch), logits(wrapped, batch))
    batch = encode(tok, side="left")
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    plain = {k: v for k, v in batch.items() if k != "system_mask"}
    assert torch.equal(base.generate(**plain, **kw), wrapped.generate(**batch, **kw))


def test_no_nan_and_no_system_rows_equal_base(tok, pair):
    base, wrapped = pair
    for side in ("left", "right"):
        batch = encode(tok, side=side)
        want, got = logits(base, batch), logits(wrapped, batch)
        assert not torch.isnan(got).any()
        assert torch.equal(got[1], want[1])  # conversation without a system prompt
        for row in (0, 2):  # positions before the span (template header, left padding)
            first = int(batch["system_mask"][row].float().argmax())
            assert torch.equal(got[row, :first], want[row, :first])
            assert not torch.allclose(got[row, first:], want[row, first:])  # the blocks do act


def test_batch_equals_one_by_one_and_left_equals_right(tok, pair):
    _, wrapped = pair
    left, right = encode(tok, side="left"), encode(tok, side="right")
    out_l, out_r = logits(wrapped, left), logits(wrapped, right)
    for b, conv in enumerate(CONVS):
        single = logits(wrapped, encode(tok, [conv]))[0]
        n = single.shape[0]
        torch.testing.assert_close(out_r[b, :n], single, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out_l[b, -n:], single, atol=1e-5, rtol=1e-5)


def test_cache_equals_no_cache_equals_token_by_token(tok, pair):
    _, wrapped = pair
    batch = encode(tok, side="left")
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)
    cached = wrapped.generate(**batch, use_cache=True, **kw)
    uncached = wrapped.generate(**batch, use_cache=False, **kw)
    assert torch.equal(cached, uncached)
    # logits of a token-by-token decode equal one full recompute of the same sequence
    full = {
        "input_ids": cached,
        "attention_mask": torch.cat(
            [batch["attention_mask"], torch.ones_like(cached[:, batch["input_ids"].shape[1] :])], 1
        ),
        "system_mask": torch.cat(
            [batch["system_mask"], torch.zeros_like(cached[:, batch["input_ids"].shape[1] :])], 1
        ),
    }
    want = logits(wrapped, full)
    t0 = batch["input_ids"].shape[1]
    with torch.no_grad():
        out = wrapped(**batch, use_cache=True)
        steps = [out.logits]
        cache = out.cache
        for t in range(t0, cached.shape[1]):
            out = wrapped(
                input_ids=cached[:, t : t + 1],
                attention_mask=full["attention_mask"][:, : t + 1],
                cache=cache,
                use_cache=True,
            )
            steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), want[:, :], atol=1e-5, rtol=1e-5)


def test_sampling_and_beam_search(tok, pair):
    _, wrapped = pair
    batch = encode(tok, side="left")
    kw = dict(max_new_tokens=5, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    sampled = wrapped.generate(**batch, do_sample=True, num_return_sequences=2, **kw)
    assert sampled.shape[0] == 2 * len(CONVS)
    beams = wrapped.generate(**batch, num_beams=3, do_sample=False, use_cache=True, **kw)
    beams_nc = wrapped.generate(**batch, num_beams=3, do_sample=False, use_cache=False, **kw)
    assert torch.equal(beams, beams_nc)


def test_fallback_from_input_ids_only(tok, pair):
    _, wrapped = pair
    batch = encode(tok, side="left")
    explicit = logits(wrapped, batch)
    ids_only = logits(
        wrapped, {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    )
    assert torch.equal(explicit, ids_only)
    wrapped.markers = None  # no tokenizer known: no span, the base model
    base = logits(wrapped.base, {k: v for k, v in batch.items() if k != "system_mask"})
    hooks_off = logits(
        wrapped, {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    )
    assert torch.equal(base, hooks_off)


def test_gradients_only_in_cal_parameters(tok, pair):
    _, wrapped = pair
    wrapped.train()
    batch = calyrex.encode_chat(tok, [CONVS[2]] * 2, with_labels=True)
    batch["labels"] = batch["input_ids"].clone()
    wrapped(**batch).loss.backward()
    trainable = {n for n, p in wrapped.named_parameters() if p.requires_grad}
    assert trainable == {n for n, _ in wrapped.named_parameters() if calyrex.is_adapter_param(n)}
    assert all(".cal_block." in n for n in trainable)
    for name, p in wrapped.named_parameters():
        if calyrex.is_adapter_param(name):
            assert p.grad is not None and p.grad.abs().sum() > 0, name
        else:
            assert p.grad is None, name
    assert calyrex.count_trainable(wrapped) == sum(
        p.numel() for p in wrapped.cal_blocks.parameters()
    )


def test_frozen_prefix_builds_no_autograd_graph(tok, pair):
    _, wrapped = pair
    wrapped.train()
    wrapped.base.enable_input_require_grads()  # what PEFT/Trainer do; the prefix must still not record
    seen = {}
    layers = wrapped.base.model.layers
    first = min(int(k) for k in wrapped.cal_blocks)
    handles = [
        layers[first - 1].register_forward_hook(lambda m, a, o: seen.update(below=o.requires_grad)),
        layers[first].register_forward_hook(lambda m, a, o: seen.update(first=o.requires_grad)),
    ]
    batch = calyrex.encode_chat(tok, [CONVS[0]])
    out = wrapped(**batch)
    for h in handles:
        h.remove()
    assert seen["below"] is False and seen["first"] is True  # the first block is trainable
    assert out.logits.requires_grad and torch.is_grad_enabled()


def test_gradient_checkpointing_gives_the_same_gradients(tok, pair):
    _, wrapped = pair
    wrapped.train()
    batch = calyrex.encode_chat(tok, CONVS, with_labels=True)
    batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)

    def grads():
        wrapped.zero_grad()
        wrapped(**batch).loss.backward()
        return {n: p.grad.clone() for n, p in wrapped.named_parameters() if p.requires_grad}

    plain = grads()
    wrapped.gradient_checkpointing_enable()
    ckpt = grads()
    wrapped.gradient_checkpointing_disable()
    for name in plain:
        torch.testing.assert_close(ckpt[name], plain[name], atol=1e-6, rtol=1e-5)


def test_bf16_forward(tok):
    base = tiny_model("qwen2").to(torch.bfloat16)
    wrapped = calyrex.wrap(
        tiny_model("qwen2").to(torch.bfloat16), calyrex.CalyrexConfig(placement="all")
    )
    batch = encode(tok)
    assert all(p.dtype == torch.bfloat16 for p in wrapped.cal_blocks.parameters())
    assert torch.equal(logits(base, batch), logits(wrapped, batch))
    randomize(wrapped, std=0.1)
    assert torch.isfinite(logits(wrapped, batch)).all()


def test_gqa_block_equals_repeated_kv_reference():
    from calyrex.core.block import CALBlock
    from calyrex.core.cal_cache import CALCache

    cfg = calyrex.CalyrexConfig(
        num_heads=4,
        num_kv_heads=2,
        head_dim=8,
        intermediate_size=16,
        norm_eps=1e-6,
        init_std=0.3,
        layers=[0],
    )
    torch.manual_seed(0)
    block = CALBlock(32, cfg)
    torch.nn.init.normal_(block.cal_o_proj.weight, std=0.3)
    h = torch.randn(2, 7, 32)
    system = torch.tensor([[0, 1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0, 0]]).bool()
    span = CALCache.fresh(2, h.device).begin(system, past=0, length=7, batch=2)
    got, new_kv = block(h, span)
    # reference: full T×T attention, keys repeated per head, explicit span-causal mask
    x = block.cal_attn_norm(h)
    q = block.cal_q_proj(x).view(2, 7, 4, 8).transpose(1, 2)
    k = block.cal_k_proj(x).view(2, 7, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = block.cal_v_proj(x).view(2, 7, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    allowed = system[:, None, :] & (
        torch.arange(7)[None, :, None] >= torch.arange(7)[None, None, :]
    )  # (B, T, T)
    scores = (q @ k.transpose(-1, -2)) / 8**0.5
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    has = allowed.any(-1)
    a = torch.where(has[:, None, :, None], torch.softmax(scores, -1), 0.0).nan_to_num() @ v
    h1 = h + block.cal_o_proj(a.transpose(1, 2).reshape(2, 7, 32)) * has[..., None]
    want = torch.where(has[..., None], h1 + block.cal_ffn(h1), h)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert torch.equal(got[0, 0], h[0, 0]) and torch.equal(got[1, :3], h[1, :3])
    # the block returns the K/V of the call's span tokens (row 1's span padded to row 0's 3)
    k_span = block.cal_k_proj(x).view(2, 7, 2, 8).transpose(1, 2)  # (B, Hkv, T, Dh)
    torch.testing.assert_close(new_kv[0][0], k_span[0, :, 1:4])
    torch.testing.assert_close(new_kv[0][1, :, :2], k_span[1, :, 3:5])


def test_unsupported_architecture_is_named():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100))
    with pytest.raises(
        calyrex.UnsupportedModelError,
        match="unsupported architecture 'gpt2'.*llama, mistral, qwen2, qwen3",
    ):
        calyrex.wrap(gpt2)


def test_init_from_host_copies_projections(tok):
    model = tiny_model("qwen2")
    norm = model.model.layers[3].input_layernorm.weight
    with torch.no_grad():
        norm.normal_()  # a trained model's norm is not all ones, as the block's starts
    wrapped = calyrex.wrap(model, calyrex.CalyrexConfig(placement="last", init_from_host=True))
    block, host = wrapped.cal_blocks["3"], wrapped.base.model.layers[3].self_attn
    assert torch.equal(block.cal_q_proj.weight, host.q_proj.weight)
    assert torch.equal(block.cal_attn_norm.weight, norm)
    assert torch.equal(block.cal_o_proj.weight, torch.zeros_like(block.cal_o_proj.weight))
