"""Core v2 (issue 11): the wrapped model behaves as an ordinary nn.Module everywhere users take it.

Copies, pickles, swapped blocks, threads, re-entrant and inner calls, reused and chunked caches,
input gradients, the adapter's base identity and the RNG. Each test asserts one property.
"""

import copy
import io
import json
import pickle
import threading
import warnings

import pytest
import torch
from transformers import DynamicCache, StaticCache

import calyrex
from calyrex.backbones.tiny import tiny_model
from calyrex.core.cal_cache import cal_cache
from calyrex.core.model import AlreadyWrappedError
from conftest import CONVS, encode, logits

GREEDY = dict(max_new_tokens=6, do_sample=False)


def _batch(tok, convs=CONVS, side="left"):
    return encode(tok, convs, side)


def _in_threads(work, n=2):
    """Run ``work(i)`` for i < n on n threads at once; the exceptions they raised."""
    errors = []

    def run(i):
        try:
            work(i)
        except Exception as err:  # noqa: BLE001 — returned to the caller's assertion
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _zero_adapter(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if calyrex.is_adapter_param(name) and "norm" not in name:
                p.zero_()


# -- copies and pickles ----------------------------------------------------------------------------
@pytest.mark.parametrize("after_forward", [False, True])
def test_deepcopy_runs_its_own_adapter(tok, pair, after_forward):
    base, wrapped = pair
    batch = _batch(tok)
    if after_forward:  # a forward with grad leaves nothing behind that the copy could share
        wrapped.train()
        wrapped(**batch).logits.sum().backward()
        wrapped.zero_grad(set_to_none=True)
        wrapped.eval()
    before = logits(wrapped, batch)
    twin = copy.deepcopy(wrapped)
    assert torch.equal(logits(twin, batch), before)
    _zero_adapter(twin)
    assert torch.equal(logits(twin, batch), logits(base, batch))  # the copy's own blocks
    assert torch.equal(logits(wrapped, batch), before)  # the original is untouched


def test_deepcopy_trains_without_touching_the_original(tok, pair):
    """TRL's create_reference_model is a deepcopy: the reference must not track the policy."""
    _, wrapped = pair
    batch = _batch(tok)
    reference = copy.deepcopy(wrapped)
    before = logits(reference, batch)
    wrapped.train()
    out = wrapped(**batch)
    assert out.logits.requires_grad
    opt = torch.optim.SGD([p for p in wrapped.parameters() if p.requires_grad], lr=0.5)
    out.logits.pow(2).mean().backward()
    opt.step()
    wrapped.eval()
    assert torch.equal(logits(reference, batch), before)
    assert not torch.allclose(logits(wrapped, batch), before)
    # and the other way round: the copy trains on its own
    reference.train()
    loss = reference(**batch).logits.pow(2).mean()
    loss.backward()
    grads = [p.grad for p in reference.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads)


def test_torch_save_load_and_pickle_round_trip(tok, pair):
    _, wrapped = pair
    batch = _batch(tok)
    want = logits(wrapped, batch)
    buf = io.BytesIO()
    torch.save(wrapped, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)  # a user's own trusted file
    assert torch.equal(logits(loaded, batch), want)
    assert torch.equal(logits(pickle.loads(pickle.dumps(wrapped)), batch), want)
    kw = dict(GREEDY, pad_token_id=tok.pad_token_id)
    assert torch.equal(loaded.generate(**batch, **kw), wrapped.generate(**batch, **kw))


# -- the module tree -------------------------------------------------------------------------------
def test_a_block_swapped_after_wrapping_takes_effect(tok, pair):
    base, wrapped = pair
    batch = _batch(tok)
    before = logits(wrapped, batch)
    for key in list(wrapped.cal_blocks):
        block = copy.deepcopy(wrapped.cal_blocks[key])
        _zero_adapter(block)
        wrapped.cal_blocks[key] = block
    assert torch.equal(logits(wrapped, batch), logits(base, batch))
    assert not torch.equal(before, logits(base, batch))


def test_wrapping_twice_is_refused_and_remove_restores_the_host(tok):
    model = tiny_model("qwen2")
    wrapped = calyrex.wrap(model, tokenizer=tok)
    with pytest.raises(AlreadyWrappedError, match="already carries calyrex blocks"):
        calyrex.wrap(model, tokenizer=tok)
    with pytest.raises(AlreadyWrappedError):
        calyrex.wrap(wrapped, tokenizer=tok)
    bare = wrapped.remove()
    assert not any("cal_block" in n for n, _ in bare.named_modules())
    again = calyrex.wrap(bare, tokenizer=tok)  # a removed model can be wrapped afresh
    assert len(again.cal_blocks) == len(wrapped.cal_blocks)


def test_remove_restores_the_callers_requires_grad_flags(tok):
    model = tiny_model("qwen2")
    model.get_input_embeddings().weight.requires_grad_(False)  # a caller's own choice
    before = {n: p.requires_grad for n, p in model.named_parameters()}
    wrapped = calyrex.wrap(model, tokenizer=tok)
    assert not any(p.requires_grad for p in wrapped.base.parameters() if p not in
                   set(wrapped.cal_blocks.parameters()))  # fmt: skip
    bare = wrapped.remove()
    assert {n: p.requires_grad for n, p in bare.named_parameters()} == before
    assert sum(before.values()) == len(before) - 1


def test_a_direct_call_of_the_inner_model_is_the_base(tok, pair):
    base, wrapped = pair
    batch = _batch(tok)
    plain = {k: v for k, v in batch.items() if k != "system_mask"}
    logits(wrapped, batch)  # a previous call leaves no span behind
    with torch.no_grad():
        inner = wrapped.base(**plain).logits
    assert torch.equal(inner, logits(base, plain))


# -- threads and re-entrant calls ------------------------------------------------------------------
def test_two_threads_equal_sequential_calls(tok, pair):
    _, wrapped = pair
    batches = [_batch(tok, [c]) for c in CONVS]
    want = [logits(wrapped, b) for b in batches]
    results = {}

    def worker(tid):
        for n in range(4):
            i = (tid + n) % len(batches)
            results[(tid, n)] = (i, logits(wrapped, batches[i]))

    assert not _in_threads(worker)
    for i, got in results.values():
        assert torch.equal(got, want[i])


def test_parallel_generate_equals_sequential(tok, pair):
    _, wrapped = pair
    kw = dict(GREEDY, pad_token_id=tok.pad_token_id)
    batches = [_batch(tok, [CONVS[0]]), _batch(tok, [CONVS[2]])]
    want = [wrapped.generate(**b, **kw) for b in batches]
    got = [None, None]

    def worker(i):
        got[i] = wrapped.generate(**batches[i], **kw)

    assert not _in_threads(worker)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


def test_a_reentrant_call_sees_only_its_own_span(tok, pair):
    """A call made from inside another call's forward (a hook) keeps both spans apart."""
    _, wrapped = pair
    outer, inner = _batch(tok, [CONVS[0]]), _batch(tok, [CONVS[2]])
    want_outer, want_inner = logits(wrapped, outer), logits(wrapped, inner)
    seen = []
    layer = wrapped.cal_layers()[0]

    def hook(module, args, output):
        if not seen:
            seen.append(None)
            seen[0] = logits(wrapped, inner)

    handle = layer.register_forward_hook(hook)
    try:
        got_outer = logits(wrapped, outer)
    finally:
        handle.remove()
    assert torch.equal(seen[0], want_inner)
    assert torch.equal(got_outer, want_outer)


# -- caches ----------------------------------------------------------------------------------------
def _greedy_with_cache(model, batch, cache, tok):
    return model.generate(**batch, cache=cache, pad_token_id=tok.pad_token_id, **GREEDY)


def test_a_reused_dynamic_cache_equals_a_fresh_one(tok, pair):
    """Multi-turn with one DynamicCache: turn 2 continues turn 1's cache ≡ turn 2 from scratch."""
    _, wrapped = pair
    conv = CONVS[0]
    cache = DynamicCache()
    first = _batch(tok, [conv])
    out = _greedy_with_cache(wrapped, first, cache, tok)
    reply = tok.decode(out[0, first["input_ids"].shape[1] :], skip_special_tokens=True)
    turn2 = [*conv, {"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]
    second = _batch(tok, [turn2])
    n = first["input_ids"].shape[1]
    # the cache holds turn 1's tokens as generated; turn 2 re-renders them: keep the common part
    ids = second["input_ids"][0]
    common = int((ids[: out.shape[1]] == out[0, : ids.shape[0]]).cumprod(0).sum())
    assert common >= n  # the whole prompt of turn 1 is shared
    extra = cache.get_seq_length() - common
    if extra > 0:
        cache.crop(-extra)  # transformers ≥ 5.2x: crop takes the number of tokens to drop
    fresh = _greedy_with_cache(wrapped, second, None, tok)
    assert torch.equal(_greedy_with_cache(wrapped, second, cache, tok), fresh)


def test_a_reset_static_cache_equals_a_fresh_one(tok, pair):
    _, wrapped = pair
    first, second = _batch(tok, [CONVS[0]]), _batch(tok, [CONVS[2]])

    def static():
        return StaticCache(config=wrapped.config, max_cache_len=96)

    fresh = _greedy_with_cache(wrapped, second, static(), tok)
    uncached = wrapped.generate(**second, use_cache=False, pad_token_id=tok.pad_token_id, **GREEDY)
    assert torch.equal(fresh, uncached)
    cache = static()
    _greedy_with_cache(wrapped, first, cache, tok)
    cache.reset()
    assert torch.equal(_greedy_with_cache(wrapped, second, cache, tok), fresh)
    # and it started over: no key of the first conversation is kept, even masked out
    assert cal_cache(cache).key_pos.shape[1] == int(second["system_mask"].sum())


def test_a_cache_cropped_inside_the_system_prompt_forgets_the_span_past_the_cut(tok, pair):
    """Cut a cache inside the system prompt and go on with another prompt that shares the part
    before the cut: ≡ that prompt from scratch (the span keys past the cut are gone)."""
    _, wrapped = pair
    user = {"role": "user", "content": "hi"}
    a, b = (
        _batch(tok, [[{"role": "system", "content": f"Always answer in French and {end}."}, user]])
        for end in ("never in English", "never mention cats")
    )
    ia, ib, sysm = a["input_ids"], b["input_ids"], b["system_mask"]
    k = int((ia[0, : ib.shape[1]] != ib[0, : ia.shape[1]]).long().argmax())  # first difference
    assert sysm[0, :k].any() and sysm[0, k:].any()  # the cut is inside the span
    with torch.no_grad():
        cache = DynamicCache()
        wrapped(input_ids=ia, system_mask=a["system_mask"], cache=cache)
        cache.crop(k - ia.shape[1])  # transformers ≥ 5.2x: the number of tokens to drop
        rest = wrapped(input_ids=ib[:, k:], system_mask=sysm[:, k:], cache=cache).logits
        whole = wrapped(input_ids=ib, system_mask=sysm).logits
    torch.testing.assert_close(rest, whole[:, k:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cut", ["inside", "after"])
def test_two_call_prefill_equals_one_call(tok, pair, cut):
    """Prefill in two forwards (cut inside the system prompt, or after it) ≡ one forward."""
    _, wrapped = pair
    batch = _batch(tok, [CONVS[0]])
    ids, sysm = batch["input_ids"], batch["system_mask"]
    span = sysm[0].nonzero().flatten()
    k = int(span[len(span) // 2]) if cut == "inside" else int(span[-1]) + 2
    with torch.no_grad():
        whole = wrapped(input_ids=ids, system_mask=sysm).logits
        cache = DynamicCache()
        a = wrapped(input_ids=ids[:, :k], system_mask=sysm[:, :k], cache=cache)
        b = wrapped(input_ids=ids[:, k:], system_mask=sysm[:, k:], cache=cache)
    torch.testing.assert_close(torch.cat([a.logits, b.logits], 1), whole, atol=1e-5, rtol=1e-5)
    assert cal_cache(cache).length == ids.shape[1]


def test_chunked_prefill_in_generate_equals_one_call(tok, pair):
    _, wrapped = pair
    batch = _batch(tok, [CONVS[0]])
    kw = dict(GREEDY, pad_token_id=tok.pad_token_id)
    whole = wrapped.generate(**batch, **kw)
    chunked = wrapped.generate(**batch, prefill_chunk_size=5, **kw)
    assert torch.equal(chunked, whole)


def test_assisted_decoding_equals_greedy(tok, pair):
    """Assisted decoding crops the cache after rejected drafts: the CAL cache follows."""
    _, wrapped = pair
    batch = _batch(tok, [CONVS[0]])
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=tok.pad_token_id)
    greedy = wrapped.generate(**batch, **kw)
    assistant = tiny_model("qwen2", seed=3)  # a bad draft model: most drafts are rejected
    assisted = wrapped.generate(**batch, assistant_model=assistant, **kw)
    assert torch.equal(assisted, greedy)
    lookup = wrapped.generate(**batch, prompt_lookup_num_tokens=3, **kw)  # drafts from the prompt
    assert torch.equal(lookup, greedy)


# -- gradients -------------------------------------------------------------------------------------
def test_input_gradients_equal_the_base_at_init(tok):
    """GCG-style attacks need d(loss)/d(inputs_embeds): present, and the base's at init."""
    base = tiny_model("qwen2")
    wrapped = calyrex.wrap(tiny_model("qwen2"), tokenizer=tok)
    batch = _batch(tok, [CONVS[0]])
    grads = []
    for model in (base, wrapped):
        embeds = model.get_input_embeddings()(batch["input_ids"]).detach().requires_grad_()
        kw = {"system_mask": batch["system_mask"]} if model is wrapped else {}
        model(
            inputs_embeds=embeds, attention_mask=batch["attention_mask"], **kw
        ).logits.sum().backward()
        grads.append(embeds.grad)
    assert grads[1] is not None
    torch.testing.assert_close(grads[1], grads[0], atol=0, rtol=0)


def test_a_batch_without_system_prompts_backpropagates(tok, pair):
    _, wrapped = pair
    wrapped.train()
    batch = _batch(tok, [CONVS[1], CONVS[1]], side="right")
    assert not batch["system_mask"].any()
    out = wrapped(**batch, labels=batch["input_ids"])
    out.loss.backward()
    grads = [p.grad for p in wrapped.parameters() if p.requires_grad]
    assert all(g is None or not g.any() for g in grads)


# -- adapter identity and construction ------------------------------------------------------------
def test_load_adapter_refuses_another_checkpoint_naming_the_tensor(tok, pair, tmp_path):
    """Same architecture, same embeddings and final norm, one decoder weight changed."""
    _, wrapped = pair
    wrapped.save_adapter(tmp_path)
    other = tiny_model("qwen2", num_hidden_layers=8)
    with torch.no_grad():
        other.model.layers[3].mlp.down_proj.weight.mul_(1.01)
    with pytest.raises(calyrex.AdapterError, match=r"layers\.3\.mlp\.down_proj"):
        calyrex.load_adapter(other, tmp_path)
    same = calyrex.load_adapter(tiny_model("qwen2", num_hidden_layers=8), tmp_path)
    batch = _batch(tok)
    assert torch.equal(logits(same, batch), logits(wrapped, batch))


def test_an_old_adapter_without_weight_samples_loads_with_a_warning(tok, pair, tmp_path):
    from calyrex.core.adapter_io import CONFIG_NAME

    _, wrapped = pair
    wrapped.save_adapter(tmp_path)
    path = tmp_path / CONFIG_NAME
    record = json.loads(path.read_text())
    del record["base_model"]["weight_samples"]
    path.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="weight samples"):
        loaded = calyrex.load_adapter(tiny_model("qwen2", num_hidden_layers=8), tmp_path)
    batch = _batch(tok)
    assert torch.equal(logits(loaded, batch), logits(wrapped, batch))


def test_wrap_seed_leaves_the_global_rng_alone(tok):
    model = tiny_model("qwen2")  # seeds the RNG itself: build it first
    torch.manual_seed(123)
    want = torch.rand(4)
    torch.manual_seed(123)
    calyrex.wrap(model, tokenizer=tok, seed=5)
    assert torch.equal(torch.rand(4), want)


def test_init_from_host_copies_the_q_k_v_biases(tok):
    model = tiny_model("qwen2")  # Qwen2 attention has q/k/v biases
    host = model.model.layers[-1].self_attn
    with torch.no_grad():
        host.q_proj.bias.normal_()
        host.k_proj.bias.normal_()
    wrapped = calyrex.wrap(
        model, calyrex.CalyrexConfig(placement="late_half", init_from_host=True), tokenizer=tok
    )
    block = wrapped.cal_blocks[str(len(model.model.layers) - 1)]
    assert block.cal_q_proj.bias is not None, "the host's biases were dropped"
    assert torch.equal(block.cal_q_proj.bias, host.q_proj.bias)
    assert torch.equal(block.cal_k_proj.bias, host.k_proj.bias)


def test_return_dict_false_keeps_the_cal_cache(tok, pair):
    _, wrapped = pair
    batch = _batch(tok, [CONVS[0]])
    with torch.no_grad():
        out = wrapped(**batch, use_cache=True, return_dict=False)
        want = wrapped(**batch, use_cache=True)
    cache = out[1]
    assert cal_cache(cache) is not None
    assert torch.equal(out[0], want.logits)


def test_no_warning_when_the_span_comes_from_the_cache(tok, pair):
    _, wrapped = pair
    batch = _batch(tok, [CONVS[0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wrapped.generate(**batch, pad_token_id=tok.pad_token_id, **GREEDY)


@pytest.mark.slow
def test_torch_compile_equals_eager(tok, pair):
    """Dynamo traces the wrapped model (graph breaks only at the span's host syncs)."""
    _, wrapped = pair
    batch = _batch(tok)
    want = logits(wrapped, batch)
    torch._dynamo.reset()
    compiled = torch.compile(wrapped, backend="aot_eager")
    assert torch.equal(logits(compiled, batch), want)


class _Delegate(torch.nn.Module):
    """What FSDP1 auto-wrap, checkpoint wrappers and ``torch.compile`` do to a block."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


def test_a_block_wrapped_by_a_delegating_module_gives_the_same_outputs(tok, pair):
    _, wrapped = pair
    batch = _batch(tok)
    want = logits(wrapped, batch)
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.no_grad():
        tokens = wrapped.generate(**batch, **kw)
    for key in list(wrapped.cal_blocks):  # every block, the span-opening one included
        wrapped.cal_blocks[key] = _Delegate(wrapped.cal_blocks[key])
    assert torch.equal(logits(wrapped, batch), want)
    with torch.no_grad():
        assert torch.equal(wrapped.generate(**batch, **kw), tokens)


class _PassThrough(torch.nn.Module):
    def forward(self, h, *args, **kwargs):
        return h


def test_a_pass_through_block_equals_the_same_block_zeroed(tok, pair):
    """The module tree is the truth: replacing block i by a pass-through module is the same
    adapter with block i's output projections at zero (the span-opening block included)."""
    _, wrapped = pair
    batch = _batch(tok)
    for key in list(wrapped.cal_blocks):
        zeroed = copy.deepcopy(wrapped)
        with torch.no_grad():
            for name, p in zeroed.cal_blocks[key].named_parameters():
                if "o_proj" in name or "down_proj" in name:
                    p.zero_()
        swapped = copy.deepcopy(wrapped)
        swapped.cal_blocks[key] = _PassThrough()
        torch.testing.assert_close(logits(swapped, batch), logits(zeroed, batch), atol=1e-6, rtol=0)
        assert not torch.equal(logits(swapped, batch), logits(wrapped, batch))


@pytest.mark.parametrize("method", ["calyrex", "lora", "parallel_mlp"])
def test_a_refused_second_adapter_changes_nothing(tok, pair, method):
    """Adapting a model that already carries calyrex blocks is refused before anything is
    touched: the first wrapper's outputs and trainable parameters stay as they were."""
    from calyrex.adapters.methods import adapt

    _, wrapped = pair
    batch = _batch(tok)
    want = logits(wrapped, batch)
    trainable = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    with pytest.raises(AlreadyWrappedError):
        adapt(wrapped.base, method, calyrex.CalyrexConfig(placement="late_half"))
    assert torch.equal(logits(wrapped, batch), want)
    assert [n for n, p in wrapped.named_parameters() if p.requires_grad] == trainable


def test_packed_documents_under_a_system_span_are_refused(tok, pair):
    """Padding-free packing (restarting position_ids), a 4-D block mask or flash-attention's
    cu_seq_lens would let a second document see the first one's system span: refused."""
    from calyrex.core.mask import positions_restart

    _, wrapped = pair
    batch = _batch(tok, [CONVS[0]])
    t = batch["input_ids"].shape[1]
    restart = torch.cat([torch.arange(t // 2), torch.arange(t - t // 2)])[None]
    with pytest.raises(ValueError, match="packed sequences"):
        wrapped(**batch, position_ids=restart)
    four_d = torch.ones(1, 1, t, t, dtype=torch.bool).tril()
    with pytest.raises(ValueError, match="packed sequences"):
        wrapped(input_ids=batch["input_ids"], attention_mask=four_d,
                system_mask=batch["system_mask"])  # fmt: skip
    # ordinary position_ids (what generate computes under left padding) are not packing
    left = calyrex.encode_chat(tok, CONVS, add_generation_prompt=True)
    positions = (left["attention_mask"].cumsum(-1) - 1).clamp_min(0)
    assert not positions_restart(positions, left["attention_mask"])
    assert positions_restart(restart, None)
    real = left["attention_mask"].bool()  # right padding: only the pad tokens' positions differ
    torch.testing.assert_close(
        logits(wrapped, {**left, "position_ids": positions})[real], logits(wrapped, left)[real]
    )
    plain = {k: v for k, v in batch.items() if k != "system_mask"}
    wrapped.markers = None  # no span at all: packing is the base model's business
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapped(**plain, position_ids=restart)
