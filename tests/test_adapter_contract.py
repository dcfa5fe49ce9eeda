"""The adapter contract (issue 39): CALYREX, ParallelMLP and LoRA answer the same calls, so no
caller branches on the method. Each property is checked on every method with visible (non-zero)
adapter weights, in fp32, bit for bit where the contract promises identity."""

import re
from pathlib import Path

import pytest
import torch

import calyrex
from calyrex.adapters.contract import Adapted
from calyrex.backbones.tiny import tiny_model
from calyrex.core.adapter_io import AdapterError
from calyrex.core.model import UnloadedError
from conftest import CONVS, encode
from test_model_contract import _adapted, _generate

METHODS = ("calyrex", "parallel_mlp", "lora")


def _logits(model, batch):
    with torch.no_grad():
        return model(**batch).logits


def _bare(batch):
    base = tiny_model("qwen2", seed=0).eval()
    return _logits(base, {k: v for k, v in batch.items() if k != "system_mask"})


@pytest.mark.parametrize("method", METHODS)
def test_every_method_answers_the_contract(method, tok):
    model = _adapted(method)
    assert isinstance(model, Adapted) and model.method == method
    assert model.uses_span == (method == "calyrex")
    trainable, total = model.get_nb_trainable_parameters()
    assert trainable == calyrex.count_trainable(model) > 0 and total > trainable
    assert model.get_base_model() is not model
    batch = encode(tok, CONVS, side="left")
    adapted = _logits(model, batch)
    assert not torch.equal(adapted, _bare(batch))  # the adapter acts
    with model.disable_adapter():  # off: the base model, bit for bit
        assert torch.equal(_logits(model, batch), _bare(batch))
    assert torch.equal(_logits(model, batch), adapted)  # back on after the context


@pytest.mark.parametrize("method", METHODS)
def test_adapter_state_round_trips_and_a_mismatch_loads_nothing(method, tok):
    model = _adapted(method)
    state = model.adapter_state_dict()
    other = calyrex.adapt(tiny_model("qwen2", seed=0), method, _config(), seed=5).eval()
    batch = encode(tok, CONVS)
    before = _logits(other, batch)
    key = sorted(state)[0]
    shaped = {**state, key: torch.zeros(3, 1)}
    for bad in (
        {k: v for k, v in state.items() if k != key},  # a tensor missing
        {**state, "cal_blocks.99.extra": torch.zeros(1)},  # one too many
        {f"base.{k}": v for k, v in state.items()},  # module keys, not file keys
        shaped,  # the right names, a wrong shape
    ):
        with pytest.raises(AdapterError, match="missing|unexpected|wrong shape"):
            other.load_adapter_state_dict(bad)
        assert torch.equal(_logits(other, batch), before)  # nothing was loaded in part
    other.load_adapter_state_dict(state)
    assert torch.equal(_logits(other, batch), _logits(model, batch))


@pytest.mark.parametrize("method", METHODS)
def test_save_load_gives_the_same_model_trainable_as_adapt(method, tok, tmp_path):
    model = _adapted(method)
    model.save_adapter(str(tmp_path / method))
    loaded = calyrex.load_adapter(tiny_model("qwen2", seed=0), tmp_path / method).eval()
    assert loaded.method == method
    assert calyrex.count_trainable(loaded) == calyrex.count_trainable(model)
    batch = encode(tok, CONVS)
    assert torch.equal(_logits(loaded, batch), _logits(model, batch))
    assert torch.equal(_generate(loaded, batch), _generate(model, batch))


@pytest.mark.parametrize("method", METHODS)
def test_unload_gives_the_base_back_and_the_wrapper_refuses(method, tok):
    model = _adapted(method)
    batch = encode(tok, CONVS[:1])
    base = model.unload()
    plain = {k: v for k, v in batch.items() if k != "system_mask"}
    assert torch.equal(_logits(base, plain), _bare(batch))
    for use in (
        lambda: model(**batch),
        lambda: _generate(model, batch),
        model.adapter_state_dict,
        model.unload,
    ):
        with pytest.raises(UnloadedError, match="unloaded"):
            use()
    again = calyrex.adapt(base, method, _config(), seed=0)  # the base is whole: adapt it anew
    assert calyrex.count_trainable(again) == calyrex.count_trainable(_adapted(method))


def test_a_merged_lora_is_the_model_with_the_update(tok):
    lora = _adapted("lora")
    batch = encode(tok, CONVS[:1])
    expected = _logits(lora, batch)
    merged = calyrex.accept_system_mask(lora.merge_and_unload())
    assert torch.allclose(_logits(merged, batch), expected, atol=1e-5)
    with pytest.raises(UnloadedError):
        lora(**batch)


def test_callers_do_not_branch_on_the_method():
    """No ``isinstance(…, CalyrexModel)`` outside the adapters package and the class's own
    module, no probe for PEFT's or calyrex's methods, one spelling of the file-key prefix."""
    src = Path(calyrex.__file__).parent
    branches, prefixes = [], []
    probe = re.compile(
        r"isinstance\([^)]*CalyrexModel\)|hasattr\([^)]*"
        r"(peft_config|save_adapter|merge_and_unload|disable_adapter|cal_blocks)"
    )
    for path in src.rglob("*.py"):
        rel = str(path.relative_to(src))
        text = path.read_text()
        if probe.search(text) and not rel.startswith("adapters/") and rel != "core/model.py":
            branches.append(rel)
        if '"cal_blocks."' in text:
            prefixes.append(rel)
    assert branches == [] and prefixes == ["core/names.py"]


def _config():
    return calyrex.CalyrexConfig(placement="late_half")


@pytest.mark.parametrize("method", METHODS)
def test_inspect_reads_every_methods_files(method, tmp_path, capsys):
    from calyrex.cli import main

    model = _adapted(method)
    model.save_adapter(str(tmp_path / method))
    assert main(["inspect", "--adapter", str(tmp_path / method)]) == 0
    printed = capsys.readouterr().out
    assert f'"method": "{method}"' in printed
    assert f"{calyrex.count_trainable(model):,} adapter parameters" in printed


def test_calyrex_imports_and_wraps_without_peft():
    """PEFT is optional (``calyrex[lora]``): the package, CALYREX and ParallelMLP work without
    it, and asking for LoRA says what to install."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['peft'] = None\n"
        "import calyrex\n"
        "from calyrex.backbones.tiny import tiny_model\n"
        "for m in ('calyrex', 'parallel_mlp'):\n"
        "    calyrex.adapt(tiny_model('qwen2'), m)\n"
        "try:\n"
        "    calyrex.adapt(tiny_model('qwen2'), 'lora')\n"
        "except ImportError as err:\n"
        "    print('lora:', err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "lora: the LoRA baseline needs PEFT: pip install 'calyrex[lora]'" in out.stdout
