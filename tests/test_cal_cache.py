"""The CAL cache (issue 26): absolute span positions, an immutable per-call span, blocks that
return their K/V instead of writing them, the row operations a server needs, one mask keyword."""

import dataclasses

import pytest
import torch
from transformers import DynamicCache

import calyrex
from calyrex.backbones.tiny import tiny_model
from calyrex.core import hf
from calyrex.core.cal_cache import CALCache, cal_cache, share_prefix
from conftest import CONVS, encode, randomize


@pytest.fixture(scope="module")
def model():
    return randomize(
        calyrex.wrap(tiny_model("qwen2", num_hidden_layers=4), calyrex.CalyrexConfig(layers=[1, 3]))
    )


def _prefill(model, ids, system_mask):
    with torch.no_grad():
        return hf.output_cache(model(input_ids=ids, system_mask=system_mask, use_cache=True))


def _row(n, span, seed):
    ids = torch.randint(0, 384, (1, n), generator=torch.Generator().manual_seed(seed))
    mask = torch.zeros(1, n, dtype=torch.bool)
    mask[0, span] = True
    return ids, mask


def test_the_span_of_a_call_is_immutable_and_in_absolute_positions(model):
    ids, mask = _row(10, slice(2, 6), 0)
    cache = _prefill(model, ids[:, :4], mask[:, :4])  # the span is cut after its 2nd token
    span = cal_cache(cache).begin(mask[:, 4:], past=4, length=6, batch=1)
    assert span.key_pos.tolist() == [[2, 3, 4, 5]] and span.gather_idx.tolist() == [[0, 1]]
    assert span.keys_before == 2 and span.length == 10
    with pytest.raises(dataclasses.FrozenInstanceError):
        span.empty = True


def test_a_block_returns_the_kv_its_layer_appends(model):
    """The block writes nothing: what it returns is what the cache holds after the call."""
    ids, mask = _row(9, slice(1, 5), 1)
    returned = {}
    hooks = [
        block.register_forward_hook(lambda m, a, out, i=int(i): returned.__setitem__(i, out[1]))
        for i, block in model.cal_blocks.items()
    ]
    try:
        store = cal_cache(_prefill(model, ids, mask))
    finally:
        for hook in hooks:
            hook.remove()
    assert sorted(returned) == sorted(store.kv) == [1, 3]
    for i, (k, v) in returned.items():
        assert k.shape[2] == 4 and store.kv[i][0] is k and store.kv[i][1] is v


def test_appending_a_call_twice_is_appending_it_once():
    """A layer recomputed by activation checkpointing appends the same keys again."""
    store = CALCache.fresh(1, torch.device("cpu"))
    first = store.begin(torch.tensor([[0, 1, 1]]), past=0, length=3, batch=1)
    store.append(0, first, (torch.ones(1, 2, 2, 4), torch.ones(1, 2, 2, 4)))
    second = store.begin(torch.tensor([[1, 0]]), past=3, length=2, batch=1)
    for _ in range(2):
        store.append(0, second, (torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4)))
    k, _ = store.kv[0]
    assert k.shape[2] == 3 and k[:, :, :2].eq(1).all() and k[:, :, 2].eq(0).all()


def test_row_operations_keep_each_rows_keys(model):
    """cat pads shorter spans with invalid keys; select, shift and repeat only move rows and
    positions; decoding the stacked rows equals decoding each row alone."""
    a_ids, a_mask = _row(8, slice(1, 6), 2)
    b_ids, b_mask = _row(6, slice(2, 4), 3)
    a, b = cal_cache(_prefill(model, a_ids, a_mask)), cal_cache(_prefill(model, b_ids, b_mask))
    both = CALCache.cat([a, b.shift(2)])  # b left-padded to a's 8 tokens
    assert both.key_pos.tolist() == [[1, 2, 3, 4, 5], [4, 5, 0, 0, 0]]
    assert both.key_valid.tolist() == [[True] * 5, [True, True, False, False, False]]
    assert not both.all_valid and both.length == 8
    back = both.select(torch.tensor([1])).shift(-2)
    assert back.key_pos[:, :2].tolist() == b.key_pos.tolist() and back.length == 6
    for i in b.kv:
        assert torch.equal(back.kv[i][0][:, :, :2], b.kv[i][0])
    assert both.select(torch.tensor([0])).all_valid  # the padded row left
    shared = a.repeat(3)
    assert shared.batch == 3 and all(k.stride(0) == 0 for k, _ in shared.kv.values())


def test_a_shared_prefix_continues_like_each_row_alone(model):
    ids, mask = _row(7, slice(1, 5), 4)
    cache = share_prefix(_prefill(model, ids, mask), 2)
    tails = torch.randint(0, 384, (2, 3), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        out = model(input_ids=tails, cache=cache, use_cache=True).logits
        for r in range(2):
            full = torch.cat([ids, tails[r : r + 1]], 1)
            alone = model(input_ids=full, system_mask=torch.nn.functional.pad(mask, (0, 3)))
            torch.testing.assert_close(out[r], alone.logits[0, 7:], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="one-row"):
        share_prefix(cache, 2)


def test_a_cache_repeated_row_by_row_continues_like_each_row_alone(model):
    """``batch_repeat_interleave`` (how HF expands a prefilled cache): row r of the repeated
    cache continues prompt r // 2, whose span differs from the other's."""
    ids = torch.randint(0, 384, (2, 7), generator=torch.Generator().manual_seed(6))
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[0, 1:5], mask[1, 2:4] = True, True
    cache = _prefill(model, ids, mask)
    cache.batch_repeat_interleave(2)
    tails = torch.randint(0, 384, (4, 3), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        out = model(input_ids=tails, cache=cache, use_cache=True).logits
        for r in range(4):
            p = r // 2
            full = torch.cat([ids[p : p + 1], tails[r : r + 1]], 1)
            alone = model(
                input_ids=full, system_mask=torch.nn.functional.pad(mask[p : p + 1], (0, 3))
            )
            torch.testing.assert_close(out[r], alone.logits[0, 7:], atol=1e-5, rtol=1e-5)


def test_generate_continuing_a_cache_slices_the_mask_like_input_ids(tok):
    """generate's system_mask covers the input_ids it gets, cached tokens included: a call that
    continues a cached prefix (cut inside the system prompt) equals one without a cache."""
    wrapped = randomize(
        calyrex.wrap(
            tiny_model("qwen2", num_hidden_layers=4),
            calyrex.CalyrexConfig(layers=[2, 3]),
            tokenizer=tok,
        )
    )
    batch = encode(tok, [CONVS[0]])
    kw = dict(max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    want = wrapped.generate(**batch, **kw)
    cut = int(batch["system_mask"][0].nonzero()[2])
    cache = DynamicCache(config=wrapped.config)
    with torch.no_grad():
        wrapped(
            input_ids=batch["input_ids"][:, :cut],
            system_mask=batch["system_mask"][:, :cut],
            cache=cache,
            use_cache=True,
        )
    continued = wrapped.generate(**batch, **hf.cache_kwargs(wrapped, cache), **kw)
    assert torch.equal(continued, want)
    assert cal_cache(cache).key_pos.tolist() == batch["system_mask"][0].nonzero().T.tolist()
