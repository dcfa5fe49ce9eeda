"""The library's adapter layer at its edges: placements refused, a block config resolved from
its host, the method registry (an unknown method, a seed), the span probe through wrappers, a
bare model taking ``system_mask``, the loaders (a refused state, span markers, eval mode) and
the resolver's offline answers. ``test_adapter_contract`` and ``test_model_contract`` check the
calls every method answers; these check what they are built from."""

import pytest
import torch
from torch import nn

import calyrex
from calyrex import placement_layers
from calyrex.adapters.loading import load_adapter, load_model
from calyrex.adapters.methods import accept_system_mask, is_calyrex
from calyrex.backbones.resolve import ModelNotFoundError, resolve_model
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.core.adapter_io import read_adapter
from calyrex.core.config import CalyrexConfig

# --- placements and configs ---------------------------------------------------------------------


def test_a_negative_layer_or_an_empty_placement_is_refused():
    with pytest.raises(ValueError, match=r"layer indices \[-1\] are outside 0..7"):
        placement_layers([-1, 3], 8)
    with pytest.raises(ValueError, match="a placement must name at least one layer"):
        placement_layers([], 8)


def test_a_block_config_takes_its_geometry_from_the_host_unless_given():
    host = tiny_model("qwen2", rms_norm_eps=1e-5, intermediate_size=48).config
    cfg = CalyrexConfig().resolve(host)
    assert (cfg.intermediate_size, cfg.norm_eps) == (48, 1e-5)
    assert cfg.layers == placement_layers("late8th", host.num_hidden_layers)
    given = CalyrexConfig(layers=[0, 2], intermediate_size=16, norm_eps=1e-3).resolve(host)
    assert (given.layers, given.intermediate_size, given.norm_eps) == ([0, 2], 16, 1e-3)


def test_a_saved_config_with_unknown_fields_is_refused():
    assert CalyrexConfig.from_dict({"placement": "last"}).placement == "last"
    with pytest.raises(ValueError, match=r"unknown CalyrexConfig fields \['gate'\]"):
        CalyrexConfig.from_dict({"placement": "last", "gate": True})


# --- the method registry ------------------------------------------------------------------------


def test_an_unknown_method_is_refused_before_the_model_is_touched():
    model = tiny_model("qwen2")
    with pytest.raises(ValueError, match=r"unknown method 'qlora'; choose one of"):
        calyrex.adapt(model, "qlora")
    assert all(p.requires_grad for p in model.parameters())  # not frozen, not wrapped


@pytest.mark.parametrize("method", ["calyrex", "parallel_mlp"])
def test_a_seed_gives_the_same_adapter_and_another_seed_another(method):
    def state(seed):
        cfg = CalyrexConfig(placement="last")
        return calyrex.adapt(tiny_model("qwen2"), method, cfg, seed=seed).adapter_state_dict()

    one, again, other = state(3), state(3), state(4)
    assert all(torch.equal(one[k], again[k]) for k in one)
    assert any(not torch.equal(one[k], other[k]) for k in one)


def test_a_module_holding_a_calyrex_model_as_an_attribute_is_not_one():
    """Only torch.compile, FSDP1 and (Distributed)DataParallel run the model they hold: any
    other module with a ``module`` child does not read the span through it."""
    model = calyrex.wrap(tiny_model("qwen2"), CalyrexConfig(placement="last"))
    holder = nn.Module()
    holder.module = model
    assert is_calyrex(nn.DataParallel(model)) and not is_calyrex(holder)


def test_a_bare_model_whose_forward_takes_no_extra_keywords_takes_the_span():
    class Plain(nn.Module):
        def forward(self, input_ids):
            return input_ids * 2

    model = accept_system_mask(Plain())
    ids = torch.tensor([[1, 2]])
    assert torch.equal(model(input_ids=ids, system_mask=torch.ones_like(ids)), ids * 2)


# --- the loaders --------------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    """A tiny base with its tokenizer, and a CALYREX adapter saved without span markers."""
    tiny_model("qwen2").save_pretrained(tmp_path / "base")
    tiny_tokenizer("chatml").save_pretrained(tmp_path / "base")
    calyrex.wrap(tiny_model("qwen2"), CalyrexConfig(placement="last")).save_adapter(
        tmp_path / "adapter"
    )
    return tmp_path


def test_a_refused_adapter_state_leaves_the_model_unwrapped(saved, monkeypatch):
    """The files pass their checks, the tensors do not fit the blocks the config builds."""
    import calyrex.adapters.loading as loading

    config, state = read_adapter(saved / "adapter")
    cut = {k: v[..., :1].clone() if v.dim() > 1 else v for k, v in state.items()}
    monkeypatch.setattr(loading, "read_adapter", lambda directory: (config, cut))
    model = tiny_model("qwen2")
    with pytest.raises(ValueError, match="wrong shape"):
        load_adapter(model, saved / "adapter")
    calyrex.adapt(model, "calyrex", CalyrexConfig(placement="last"))  # a bare model again


def test_a_tokenizer_rebuilds_the_span_markers_an_adapter_was_saved_without(saved):
    bare = load_adapter(tiny_model("qwen2"), saved / "adapter")
    assert bare.markers is None and "saved without them" in bare.markers_reason
    tok = tiny_tokenizer("chatml")
    rebuilt = load_adapter(tiny_model("qwen2"), saved / "adapter", tokenizer=tok)
    assert rebuilt.markers is not None


def test_the_one_loader_gives_a_model_in_eval_mode(saved):
    model, tok = load_model(str(saved / "base"), str(saved / "adapter"), dtype="float32")
    assert not model.training and is_calyrex(model)
    assert not any(m.training for m in model.modules())


# --- the resolver -------------------------------------------------------------------------------


@pytest.fixture
def no_hub(monkeypatch):
    import huggingface_hub

    def asked(*args, **kwargs):
        raise AssertionError("the hub was asked")

    for name in ("try_to_load_from_cache", "model_info"):
        monkeypatch.setattr(huggingface_hub, name, asked)
    return huggingface_hub


@pytest.mark.parametrize("name", ["./missing", "~/missing", "/no/such/dir", "a/b/c"])
def test_a_local_path_that_does_not_exist_is_not_asked_of_the_hub(no_hub, name):
    with pytest.raises(ModelNotFoundError, match="no model directory"):
        resolve_model(name)


def test_offline_a_hub_id_outside_the_cache_is_refused_without_asking(no_hub, monkeypatch):
    monkeypatch.setattr(no_hub, "try_to_load_from_cache", lambda *a, **k: None)
    monkeypatch.setattr(no_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE is set"):
        resolve_model("org/model")
