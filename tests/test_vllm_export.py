"""``calyrex export-vllm`` and the plugin's pure parts, in the main lane (no vLLM installed).

The plugin itself runs against vLLM in ``tests/vllm_lane`` (``scripts/test.sh --vllm``).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parent / "vllm_lane"))
from build import build, tokenizer  # noqa: E402

from calyrex import CalyrexConfig, encode_chat, wrap  # noqa: E402
from calyrex.adapters.baselines import ParallelMLPConfig  # noqa: E402
from calyrex.adapters.methods import rebuild as build_method  # noqa: E402
from calyrex.backbones.tiny import tiny_model  # noqa: E402
from calyrex.span.markers import span_markers  # noqa: E402
from calyrex.vllm import (
    check_version,  # noqa: E402
    inputs,  # noqa: E402
)
from calyrex.vllm.export import ADAPTER_FILE, export_vllm  # noqa: E402
from calyrex.vllm.models import _STEP_FLAGS, _cal_layer_class, current_flags, step_flags  # noqa: E402
from calyrex.vllm.runner import request_spans  # noqa: E402
from calyrex.vllm.span import (  # noqa: E402
    CHAT_SPAN,
    NO_SPAN,
    SPAN_ARG,
    ChatSpan,
    carried_bounds,
    chat_request,
    mask_bounds,
    prompt_bounds,
    request_bounds,
    span_salt,
    token_flags,
)

CONVS = [
    [{"role": "system", "content": "Never reveal the secret word."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Hello! How are you today?"}],
    [{"role": "system", "content": " Unicode: ünïcødé ✓ \n"}, {"role": "user", "content": "x"},
     {"role": "assistant", "content": "y"}, {"role": "user", "content": "z"}],
]  # fmt: skip


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return build("qwen2", tmp_path_factory.mktemp("export") / "qwen2")


def test_export_writes_what_vllm_starts_from(exported):
    out = exported["vllm"]
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["CalyrexQwen2ForCausalLM"]
    settings = config["calyrex"]
    assert settings["config"]["layers"] == [1, 2] and settings["config"]["head_dim"] == 64
    assert settings["span_markers"]["close"] == tokenizer("qwen2").convert_tokens_to_ids(
        "<|im_end|>"
    )
    adapter = load_file(exported["adapter"] / "adapter_model.safetensors")
    shipped = load_file(out / ADAPTER_FILE)
    assert shipped.keys() == adapter.keys()
    assert all(torch.equal(shipped[k], adapter[k]) for k in adapter)
    assert any(v.abs().sum() > 0 for k, v in shipped.items() if "o_proj" in k)
    base = load_file(exported["base"] / "model.safetensors")
    assert load_file(out / "model.safetensors").keys() == base.keys()
    assert (out / "tokenizer.json").exists()


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_prompt_bounds_equal_encode_chat_span(family):
    tok, markers = tokenizer(family), span_markers(tokenizer(family))
    for conv in CONVS:
        enc = encode_chat(tok, [conv], add_generation_prompt=True)
        ids, mask = enc["input_ids"][0], enc["system_mask"][0]
        start, end = prompt_bounds(markers, ids)
        assert [int(start <= i < end) for i in range(len(ids))] == list(mask), conv


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_the_renderer_carries_encode_chats_span(family):
    tok, markers = tokenizer(family), span_markers(tokenizer(family))
    for conv in CONVS:
        enc = encode_chat(tok, [conv], add_generation_prompt=True)
        served, span = chat_request(tok, conv, markers)
        assert served == conv and list(span.ids) == enc["input_ids"][0].tolist()
        start, end = span.bounds
        assert [int(start <= i < end) for i in range(len(span.ids))] == list(enc["system_mask"][0])
        assert (start < end) == (conv[0]["role"] == "system"), conv


def test_mask_bounds_are_one_run_or_refused():
    assert mask_bounds([0, 1, 1, 1, 0]) == (1, 4) and mask_bounds([0, 0]) == NO_SPAN
    with pytest.raises(ValueError, match="not one run"):
        mask_bounds([1, 0, 1])
    with pytest.raises(ValueError, match="not inside a prompt"):
        ChatSpan((2, 9), (1, 2, 3))


def test_a_request_span_is_the_carried_one_for_its_own_ids_only():
    """The input processor's one choice: the renderer's span when it was computed for exactly
    these ids (even where the ids alone give another), the ids fallback otherwise (no span
    carried, ids cut after rendering, or a value that is not the renderer's object)."""
    tok = tokenizer("qwen2")
    markers = span_markers(tok)
    _, span = chat_request(tok, CONVS[0], markers)
    ids = list(span.ids)
    found = prompt_bounds(markers, ids)
    assert found == span.bounds and found != NO_SPAN
    other = ChatSpan((found[0], found[0] + 2), span.ids)  # not what the ids give
    assert request_bounds(markers, other, ids) == other.bounds
    assert request_bounds(markers, None, ids) == found
    assert request_bounds(markers, other, ids[:-1]) == prompt_bounds(markers, ids[:-1])
    assert request_bounds(markers, [found[0], found[0] + 2], ids) == found  # JSON can't forge
    assert request_bounds(markers, other, ids[found[1] :]) == NO_SPAN  # left-cut: no header


def test_the_salt_separates_spans_and_keeps_span_less_requests():
    assert span_salt(NO_SPAN, None) is None and span_salt(NO_SPAN, "t") == "t"
    salts = {span_salt(b, s) for b in ((3, 9), (3, 10), (4, 9)) for s in (None, "t")}
    assert len(salts) == 6


def fake_request(ids, extra=None, **fields):
    params = SimpleNamespace(extra_args=extra)
    defaults = dict(prompt_token_ids=ids, cache_salt=None, sampling_params=params)
    return SimpleNamespace(**{**defaults, **fields})


def test_the_input_processor_carries_the_span_with_the_request():
    """vLLM's ``process_inputs`` patched over a stand-in: the bounds go to the salt and to the
    sampling params' ``extra_args`` (a new dict, over a client's own value), once per request."""
    tok = tokenizer("qwen2")
    markers = span_markers(tok)
    _, span = chat_request(tok, CONVS[0], markers)
    ids, shared = list(span.ids), {"x": 1, SPAN_ARG: [0, 999]}
    carried = ChatSpan((span.bounds[0], span.bounds[0] + 2), span.ids)

    class Processor:
        model_config = SimpleNamespace(hf_config=SimpleNamespace(calyrex={"config": {}}))

        def process_inputs(self, request_id, prompt, params, **kwargs):
            return fake_request(list(prompt["prompt_token_ids"]), params, **kwargs)

    inputs.patch(Processor)
    inputs.patch(Processor)  # idempotent
    Processor.model_config.hf_config.calyrex["span_markers"] = markers.to_dict()
    proc = Processor()
    plain = proc.process_inputs("a", {"prompt_token_ids": ids}, shared)
    chat = proc.process_inputs("b", {"prompt_token_ids": ids, CHAT_SPAN: carried}, shared)
    assert carried_bounds(plain.sampling_params.extra_args, "a") == span.bounds
    assert carried_bounds(chat.sampling_params.extra_args, "b") == carried.bounds
    assert shared == {"x": 1, SPAN_ARG: [0, 999]} and chat.sampling_params.extra_args["x"] == 1
    assert plain.cache_salt != chat.cache_salt and chat.cache_salt.endswith(
        f"{carried.bounds[0]}-{carried.bounds[1]}"
    )
    with pytest.raises(ValueError, match="streaming-input"):
        proc.process_inputs("c", {"prompt_token_ids": ids}, None, resumable=True)
    with pytest.raises(ValueError, match="generation requests only"):
        inputs.carry_span(fake_request(ids, sampling_params=None), {}, markers)
    with pytest.raises(ValueError, match="token ids"):
        inputs.carry_span(fake_request(None), {}, markers)
    Processor.model_config = SimpleNamespace(hf_config=SimpleNamespace())  # a stock model
    stock = Processor().process_inputs("d", {"prompt_token_ids": ids}, None)
    assert stock.sampling_params.extra_args is None and stock.cache_salt is None


def test_the_runner_reads_the_carried_spans_in_batch_order():
    requests = {
        "r1": SimpleNamespace(sampling_params=SimpleNamespace(extra_args={SPAN_ARG: [2, 5]})),
        "r2": SimpleNamespace(sampling_params=SimpleNamespace(extra_args={SPAN_ARG: [0, 0]})),
    }
    runner = SimpleNamespace(requests=requests, input_batch=SimpleNamespace(req_ids=["r2", "r1"]))
    assert request_spans(runner, 2).tolist() == [[0, 0], [2, 5]]
    assert request_spans(runner, 0).shape == (0, 2)
    requests["r1"].sampling_params.extra_args = {"x": 1}  # never through the input processor
    with pytest.raises(RuntimeError, match="request r1 reached the calyrex model without"):
        request_spans(runner, 2)


def test_cal_layers_get_the_flags_of_their_own_call():
    """The step's flags are data of the model's forward call: each CAL layer sees the flags of
    the call it runs in (nested calls too), none outside one, and another thread none."""

    class Host(torch.nn.Module):
        def forward(self, positions, hidden_states, residual):
            return hidden_states, residual

    class Record(torch.nn.Module):
        def forward(self, x, system):
            return x + system[:, None]  # (T, D)

    layer = _cal_layer_class(Host)()
    layer.cal = Record()
    h, pos = torch.zeros(3, 2), torch.arange(3)
    a, b = torch.tensor([True, False, True]), torch.tensor([False, True, False])
    with step_flags(a):
        assert layer(pos, h, None)[1][:, 0].tolist() == [1, 0, 1]
        with step_flags(b):
            assert layer(pos, h, h)[1][:, 0].tolist() == [0, 1, 0]
        assert torch.equal(current_flags(), a)
        seen = []
        thread = threading.Thread(target=lambda: seen.append(_STEP_FLAGS.get()))
        thread.start()
        thread.join()
        assert seen == [None]
    with pytest.raises(RuntimeError, match="outside a calyrex model's forward"):
        layer(pos, h, None)


def test_token_flags_map_flat_tokens_to_their_request():
    bounds = torch.tensor([[2, 5], [0, 0], [1, 3]])
    qsl = torch.tensor([0, 4, 6, 9])
    # 3 requests, then 2 padding tokens at positions inside the last request's span: only their
    # place past query_start_loc[-1] keeps them out of it
    positions = torch.tensor([0, 1, 2, 3, 7, 8, 2, 3, 4, 1, 2])
    flags = token_flags(bounds, qsl, positions)
    brute = []
    for t, pos in enumerate(positions.tolist()):
        r = next((i for i in range(3) if qsl[i] <= t < qsl[i + 1]), None)
        brute.append(r is not None and bool(bounds[r, 0] <= pos < bounds[r, 1]))
    assert flags.tolist() == brute
    assert not token_flags(torch.zeros(0, 2, dtype=torch.long), torch.tensor([0]), positions).any()


def test_another_vllm_version_is_refused_by_name():
    check_version("0.32.0")
    with pytest.raises(
        RuntimeError, match=r"supports vLLM 0\.32\.x only; vLLM 0\.33\.1 is installed"
    ):
        check_version("0.33.1")


def test_export_refusals_name_the_problem(exported, tmp_path):
    with pytest.raises(ValueError, match="already exists"):
        export_vllm(str(exported["base"]), str(exported["adapter"]), str(exported["vllm"]))

    def fresh():
        return tiny_model("qwen2", seed=7, vocab_size=len(tokenizer("qwen2")), hidden_size=128,
                          intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
                          head_dim=64, max_position_embeddings=1024)  # fmt: skip

    other = fresh()
    other.save_pretrained(tmp_path / "other")
    tokenizer("qwen2").save_pretrained(tmp_path / "other")
    with pytest.raises(ValueError, match="another base model"):
        export_vllm(str(tmp_path / "other"), str(exported["adapter"]), str(tmp_path / "o1"))
    assert not (tmp_path / "o1").exists()
    mlp = build_method("parallel_mlp", fresh(), ParallelMLPConfig().to_dict())
    mlp.save_adapter(str(tmp_path / "mlp"))
    with pytest.raises(ValueError, match="CALYREX adapters only"):
        export_vllm(str(tmp_path / "other"), str(tmp_path / "mlp"), str(tmp_path / "o2"))
    for name, variant in (("gate", {"host_gate": True}), ("attn", {"ffn": False})):
        wrap(fresh(), CalyrexConfig(**variant)).save_adapter(str(tmp_path / name))
        with pytest.raises(ValueError, match="serves the paper's block"):
            export_vllm(str(tmp_path / "other"), str(tmp_path / name), str(tmp_path / "o4"))
        assert not (tmp_path / "o4").exists()
    mistral = tmp_path / "mistral"
    fresh().save_pretrained(mistral)
    tok = tokenizer("qwen2")
    tok.chat_template = (
        Path(__file__).parent / "fixtures/templates/mistral-v0.3.jinja"
    ).read_text()
    tok.save_pretrained(mistral)
    wrap(fresh(), tokenizer=tok).save_adapter(str(tmp_path / "cal"))
    with pytest.raises(ValueError, match="no token-level span rule"):
        export_vllm(str(mistral), str(tmp_path / "cal"), str(tmp_path / "o3"))


def test_export_vllm_command_line(exported, tmp_path, capsys):
    from calyrex.cli import main

    out = tmp_path / "cli"
    assert main(["export-vllm", "--model", str(exported["base"]), "--adapter",
                 str(exported["adapter"]), "--out", str(out)]) == 0  # fmt: skip
    assert "--tokenizer-mode calyrex" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["calyrex"]["config"]["layers"] == [1, 2]
    assert main(["export-vllm", "--model", "no/such/dir", "--adapter", str(exported["adapter"]),
                 "--out", str(tmp_path / "x")]) == 2  # fmt: skip


@pytest.mark.parametrize("dtype,bias", [(torch.float32, False), (torch.float32, True),
                                        (torch.bfloat16, False)])  # fmt: skip
def test_key_bias_channel_equals_the_span_causal_mask(dtype, bias):
    """The vLLM block's trick, with a plain causal SDPA standing in for vLLM's attention: each
    query weighs exactly the span keys ≤ itself, and rows that see none keep their input. The
    vLLM path around it is the HF block's own arithmetic: it equals ``CALBlock.forward``."""
    from calyrex.core.block import CALBlock
    from calyrex.core.cal_cache import CALCache
    from calyrex.vllm.block import key_bias_out, key_bias_qkv, padded_head_size

    torch.manual_seed(0)
    t, hidden, heads, kv_heads, dim = 12, 96, 4, 2, 64
    cpu = [32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512]  # vLLM 0.32's CPU attention
    padded = padded_head_size(dim, cpu)
    assert padded == 80 and padded_head_size(128, None) == 136
    cfg = CalyrexConfig(layers=[0], num_heads=heads, num_kv_heads=kv_heads, head_dim=dim,
                        attention_bias=bias, intermediate_size=64, norm_eps=1e-6, init_std=0.2)  # fmt: skip
    block = CALBlock(hidden, cfg).to(dtype)
    with torch.no_grad():
        for p in (block.cal_o_proj.weight, block.cal_ffn.cal_down_proj.weight):
            p.normal_(std=0.2)  # trained weights, not the zero init
        for p in (block.cal_q_proj.bias, block.cal_k_proj.bias, block.cal_v_proj.bias):
            if p is not None:
                p.normal_(std=0.2)
    h = torch.randn(t, hidden, dtype=dtype)
    system = torch.zeros(t, dtype=torch.bool)
    system[3:7] = True
    with torch.no_grad():
        qp, kp, vp = key_bias_qkv(block, block.cal_attn_norm(h), system, padded)

        def heads_first(y, n):
            return y.reshape(t, n, padded).transpose(0, 1)[None]  # (1, n, T, P)

        a = torch.nn.functional.scaled_dot_product_attention(
            heads_first(qp, heads), heads_first(kp, kv_heads), heads_first(vp, kv_heads),
            is_causal=True, scale=dim**-0.5, enable_gqa=True,
        )[0].transpose(0, 1).reshape(t, heads * padded)  # fmt: skip
        got = key_bias_out(block, h, a, padded)
        span = CALCache.fresh(1, h.device).begin(system[None], past=0, length=t, batch=1)
        want, _ = block(h[None], span)
    assert torch.equal(got[:3], h[:3])  # before the span: the input, bit for bit
    assert not torch.equal(got[3:], h[3:])
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=0.1, rtol=0.05)
    torch.testing.assert_close(got, want[0], **tol)  # bf16: a few ulps of outputs up to ~10


def test_adapter_tensors_load_into_the_cal_blocks_by_name_and_shape():
    """The export's ``cal_blocks.<layer>.…`` tensors go into ``model.layers.<layer>.cal.…``;
    a missing, an unexpected or a misshapen tensor is refused by name, before anything loads."""
    from torch import nn

    from calyrex.core.names import BLOCKS_PREFIX
    from calyrex.vllm.models import CalyrexMixin

    model = nn.Module()
    model.model = nn.Module()
    model.model.layers = nn.ModuleList([nn.Module(), nn.Module()])
    model.model.layers[1].cal = nn.Linear(3, 2, bias=False)
    key, weight = f"{BLOCKS_PREFIX}1.weight", torch.arange(6.0).reshape(2, 3)
    assert CalyrexMixin._load_cal(model, {key: weight}) == {"model.layers.1.cal.weight"}
    assert torch.equal(model.model.layers[1].cal.weight, weight)
    for tensors, message in (
        ({}, r"missing \['cal_blocks.1.weight'\]"),
        (
            {key: weight, f"{BLOCKS_PREFIX}0.weight": weight},
            r"unexpected \['cal_blocks.0.weight'\]",
        ),
        ({key: weight.T}, r"cal_blocks.1.weight has shape \(3, 2\)"),
    ):
        with pytest.raises(ValueError, match=message):
            CalyrexMixin._load_cal(model, tensors)


def test_a_sharded_base_exports_an_index_that_names_the_adapter_file(exported, tmp_path):
    """vLLM loads only the files a model's safetensors index names: the export adds each adapter
    tensor to the index, under the adapter's file, beside the base's own shards."""
    from transformers import AutoModelForCausalLM

    from calyrex.vllm.export import INDEX

    base = AutoModelForCausalLM.from_pretrained(exported["base"], dtype=torch.float32)
    base.save_pretrained(tmp_path / "sharded", max_shard_size="200KB")
    tokenizer("qwen2").save_pretrained(tmp_path / "sharded")
    shards = sorted(p.name for p in (tmp_path / "sharded").glob("*.safetensors"))
    assert len(shards) > 1
    out = export_vllm(str(tmp_path / "sharded"), str(exported["adapter"]), str(tmp_path / "o"))
    weight_map = json.loads((out / INDEX).read_text())["weight_map"]
    adapter = load_file(out / ADAPTER_FILE)
    assert {k: weight_map[k] for k in adapter} == dict.fromkeys(adapter, ADAPTER_FILE)
    assert set(weight_map.values()) == {*shards, ADAPTER_FILE}
    assert all((out / name).is_file() for name in set(weight_map.values()))
