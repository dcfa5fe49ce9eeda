"""One model contract (issue 26): one batch feeds every method, one probe says which is calyrex.

``encode_chat``'s batch (``system_mask`` included) goes unchanged into ``forward`` and
``generate`` of the base model, CALYREX, ParallelMLP and LoRA, fresh or saved and loaded again;
a model with no span pathway ignores the mask exactly.
"""

import copy
import io
from pathlib import Path

import pytest
import torch

import calyrex
from calyrex.backbones.tiny import tiny_model
from conftest import CONVS, encode, randomize

LAYERS = 4


def _trained(model):
    """Visible adapter weights: CAL / ParallelMLP by name, LoRA's B (zero at init) too."""
    randomize(model)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model.eval()


def _adapted(method):
    config = calyrex.CalyrexConfig(placement="late_half")
    return _trained(calyrex.adapt(tiny_model("qwen2", seed=0), method, config, seed=0))


def _save(model, path: Path) -> Path:
    calyrex.save_adapter(model, path)
    return path


def _without_mask(batch):
    return {k: v for k, v in batch.items() if k != "system_mask"}


def _generate(model, batch):
    with torch.no_grad():
        return model.generate(**batch, max_new_tokens=3, do_sample=False, pad_token_id=0)


def _assert_mask_ignored(model, tok):
    """``forward`` and ``generate`` take ``system_mask`` and give what they give without it."""
    batch = encode(tok, CONVS[::2], side="left")  # two rows, both with a system prompt
    with torch.no_grad():
        with_mask = model(**batch).logits
        without = model(**_without_mask(batch)).logits
    assert torch.equal(with_mask, without)
    assert torch.equal(_generate(model, batch), _generate(model, _without_mask(batch)))


@pytest.mark.parametrize("method", ["lora", "parallel_mlp"])
def test_baselines_take_the_batch_and_ignore_the_span(method, tok, tmp_path):
    model = _adapted(method)
    _assert_mask_ignored(model, tok)
    loaded = calyrex.load_adapter(tiny_model("qwen2", seed=0), _save(model, tmp_path / method))
    _assert_mask_ignored(loaded.eval(), tok)
    batch = encode(tok, CONVS[:1])  # save → load: the same model
    assert torch.equal(_generate(loaded, batch), _generate(model, batch))


def test_the_base_model_from_the_one_loader_takes_the_batch(tok, tmp_path):
    tiny_model("qwen2", seed=0).save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    base, _ = calyrex.load_model(str(tmp_path / "base"), dtype="float32", device="cpu")
    _assert_mask_ignored(base, tok)
    lora = _save(_adapted("lora"), tmp_path / "lora")
    loaded, _ = calyrex.load_model(str(tmp_path / "base"), str(lora), "float32", "cpu")
    _assert_mask_ignored(loaded, tok)


def test_a_calyrex_model_reads_the_span_it_is_given(tok):
    """The contract does not blunt CALYREX: its logits depend on the span."""
    model = _adapted("calyrex")
    batch = encode(tok, CONVS)
    assert calyrex.accept_system_mask(model) is model
    with torch.no_grad():
        spanned = model(**batch).logits
        empty = model(**{**batch, "system_mask": torch.zeros_like(batch["system_mask"])}).logits
    assert not torch.equal(spanned, empty)


def test_accepting_the_mask_survives_copies_and_repeats(tok):
    lora = _adapted("lora")
    assert calyrex.accept_system_mask(lora) is lora  # it takes the span itself: nothing added
    assert not lora.get_base_model()._forward_pre_hooks
    batch = encode(tok, CONVS[:1])
    expected = _generate(lora, batch)
    buffer = io.BytesIO()
    torch.save(lora, buffer)
    buffer.seek(0)
    for other in (copy.deepcopy(lora), torch.load(buffer, weights_only=False)):
        assert torch.equal(_generate(other, batch), expected)
    base = calyrex.accept_system_mask(tiny_model("qwen2"))
    hooks = len(base._forward_pre_hooks)
    assert calyrex.accept_system_mask(base) is base  # twice: nothing added
    assert len(base._forward_pre_hooks) == hooks


def test_a_bare_hf_model_refuses_the_span_until_it_accepts_it(tok):
    """What the contract fixes: HF's ``generate`` rejects an unknown keyword."""
    model = tiny_model("qwen2")
    batch = encode(tok, CONVS[:1])
    with pytest.raises(ValueError, match="system_mask"):
        _generate(model, batch)
    _assert_mask_ignored(calyrex.accept_system_mask(model), tok)


def test_is_calyrex_sees_calyrex_models_through_wrappers():
    for method in ("calyrex", "parallel_mlp"):
        model = _adapted(method)
        assert calyrex.is_calyrex(model)
        assert calyrex.is_calyrex(torch.compile(model))  # not run: wrapping only
        assert calyrex.is_calyrex(torch.nn.DataParallel(model))
    for other in (tiny_model("qwen2"), _adapted("lora"), torch.nn.Sequential(tiny_model("qwen2"))):
        assert not calyrex.is_calyrex(other)
    assert not calyrex.is_calyrex(calyrex.wrap(tiny_model("qwen2")).remove())


def test_one_probe_and_one_loader_in_the_source():
    """``is_calyrex`` is the only test of "is this a calyrex model"; ``load_model`` the only
    loader of a model from a name (the four per-command loaders are gone)."""
    src = Path(calyrex.__file__).parent
    probes, loaders = [], []
    for path in src.rglob("*.py"):
        text = path.read_text()
        if 'hasattr(model, "cal_blocks")' in text:
            probes.append(path.name)
        if "def load_model(" in text or "def load_backbone(" in text:
            loaders.append(str(path.relative_to(src)))
    assert probes == [] and sorted(loaders) == ["adapters/loading.py"]


def test_ruleworld_backbone_is_a_name_of_the_one_loader():
    from calyrex.research.ruleworld.pretrain import ASSET_DIR

    if not (ASSET_DIR / "config.json").exists():
        pytest.skip("no shipped RuleWorld backbone")
    model, tok = calyrex.load_model("ruleworld", dtype="float32", device="cpu")
    assert model.config.num_hidden_layers >= 12 and model.dtype == torch.float32
    assert calyrex.span_markers(tok) is not None
