import json

import pytest
import torch

import calyrex
from calyrex.backbones.tiny import tiny_model
from calyrex.core.adapter_io import CONFIG_NAME, WEIGHTS_NAME
from conftest import CONVS, logits, randomize


@pytest.fixture
def saved(tok, tmp_path):
    wrapped = randomize(
        calyrex.wrap(
            tiny_model("qwen2", seed=0), calyrex.CalyrexConfig(placement="late8th"), tokenizer=tok
        )
    )
    wrapped.save_adapter(tmp_path / "adapter")
    return wrapped, tmp_path / "adapter"


def test_save_load_gives_identicallogits(tok, saved):
    wrapped, path = saved
    batch = calyrex.encode_chat(tok, CONVS, add_generation_prompt=True)
    loaded = calyrex.load_adapter(tiny_model("qwen2", seed=0), path)
    assert torch.equal(logits(wrapped, batch), logits(loaded, batch))
    assert loaded.markers == wrapped.markers  # the fallback markers travel with the adapter
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_NAME, WEIGHTS_NAME]
    config = json.loads((path / CONFIG_NAME).read_text())
    assert config["method"] == "calyrex" and config["config"]["layers"] == [2, 3]
    assert config["base_model"]["fingerprint"]["hidden_size"] == 32


def test_weights_file_holds_only_cal_tensors(saved):
    from safetensors.torch import load_file

    _, path = saved
    keys = load_file(path / WEIGHTS_NAME).keys()
    assert keys and all(calyrex.is_adapter_param(k) and k.startswith("cal_blocks.") for k in keys)


def test_refuses_another_architecture(saved):
    _, path = saved
    with pytest.raises(
        calyrex.AdapterError, match="another base model.*hidden_size: adapter 32 vs model 64"
    ):
        calyrex.load_adapter(tiny_model("qwen2", hidden_size=64, intermediate_size=128), path)
    with pytest.raises(calyrex.AdapterError, match="model_type: adapter 'qwen2' vs model 'llama'"):
        calyrex.load_adapter(tiny_model("llama"), path)


def test_refuses_same_architecture_other_weights(saved):
    _, path = saved
    with pytest.raises(calyrex.AdapterError, match="different weights"):
        calyrex.load_adapter(tiny_model("qwen2", seed=7), path)


def test_accepts_the_same_base_in_another_dtype(saved):
    _, path = saved
    calyrex.load_adapter(tiny_model("qwen2", seed=0).to(torch.bfloat16), path)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage_header"])
def test_refuses_corrupted_weights(saved, damage):
    _, path = saved
    file = path / WEIGHTS_NAME
    data = bytearray(file.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[-5] ^= 0xFF
    else:
        data[:8] = b"\xff" * 8
    file.write_bytes(bytes(data))
    with pytest.raises(calyrex.AdapterError, match="corrupted or truncated"):
        calyrex.load_adapter(tiny_model("qwen2", seed=0), path)


def test_refuses_unreadable_config(saved):
    _, path = saved
    (path / CONFIG_NAME).write_text("{not json")
    with pytest.raises(calyrex.AdapterError, match="not valid JSON"):
        calyrex.load_adapter(tiny_model("qwen2", seed=0), path)
    (path / CONFIG_NAME).write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(calyrex.AdapterError, match="cannot read adapter config"):
        calyrex.load_adapter(tiny_model("qwen2", seed=0), path)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(calyrex.AdapterError, match="no adapter at"):
        calyrex.load_adapter(tiny_model("qwen2"), str(tmp_path / "nope"))


def test_atomic_save_leaves_no_temporary_files(saved):
    wrapped, path = saved
    wrapped.save_adapter(path)  # overwrite in place
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_NAME, WEIGHTS_NAME]


@pytest.mark.parametrize("numel", [1, 2, 7, 8, 1000, 2**24 - 1, 2**24 + 1, 28_311_552, 2**40 + 3])
def test_weight_sample_positions_stay_inside_any_tensor(numel):
    """Integer positions: a float32 linspace rounded its last sample past the end of a tensor
    with more than 2^24 elements (SmolLM2's embedding: 28,311,552)."""
    from calyrex.core.hf import sample_positions

    idx = sample_positions(numel, 8)
    assert len(idx) == min(8, numel) and int(idx[0]) == 0 and int(idx[-1]) == numel - 1
    assert bool((idx[1:] > idx[:-1]).all()) and idx.dtype == torch.long
