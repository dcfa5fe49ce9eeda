"""Tiny head_dim-64 Qwen2 / Llama checkpoints with verbatim chat templates, a CALYREX adapter
with non-zero weights, and their ``calyrex export-vllm`` directories — built offline.

vLLM's CPU attention rejects head_dim 40 (RuleWorld's backbone), so these use 64. Used by the
vLLM lane's tests and by ``benchmarks/vllm_bench.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from calyrex import CalyrexConfig, wrap
from calyrex.backbones.tiny import CHATML_SPECIALS as CHATML
from calyrex.backbones.tiny import LLAMA3_SPECIALS as LLAMA
from calyrex.backbones.tiny import byte_level_tokenizer, tiny_model
from calyrex.vllm.export import export_vllm

TEMPLATES = Path(__file__).resolve().parents[1] / "fixtures" / "templates"
# family: (HF architecture, verbatim template, tokenizer special tokens, bos, eos, pad)
FAMILIES = {
    "qwen2": ("qwen2", "qwen2.5", CHATML, None, "<|im_end|>", "<|endoftext|>"),
    "qwen3": ("qwen3", "qwen3", CHATML, None, "<|im_end|>", "<|endoftext|>"),
    "llama": ("llama", "llama3.3", LLAMA, "<|begin_of_text|>", "<|eot_id|>", "<|pad|>"),
}
SMALL = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    max_position_embeddings=1024,
)


def vllm_server(model: Path, port: int, log: Path, *args: str) -> subprocess.Popen:
    """vLLM's OpenAI server on ``model`` as the lane runs it (eager, fp32, blocks of 32, a 1 GiB
    CPU KV cache), output to ``log``; ``args``: more server flags."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--enforce-eager", "--dtype", "float32", "--block-size", "32", "--port", str(port),
           *args]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def tokenizer(family: str):
    _, template, specials, bos, eos, pad = FAMILIES[family]
    return byte_level_tokenizer(
        specials, bos, eos, pad, (TEMPLATES / f"{template}.jinja").read_text()
    )


def build(
    family: str,
    root: Path,
    zero: bool = False,
    size: dict | None = None,
    layers: list[int] | None = None,
    seed: int = 0,
) -> dict[str, Path]:
    """``root/base`` (HF checkpoint), ``root/adapter`` and ``root/vllm`` (export). ``zero``: the
    adapter as initialised (W_O = W_D = 0, the identity); else every tensor random, non-zero."""
    arch = FAMILIES[family][0]
    tok = tokenizer(family)
    geometry = {**SMALL, **(size or {})}
    model = tiny_model(arch, seed=seed, vocab_size=len(tok), **geometry)
    model.generation_config.pad_token_id = tok.pad_token_id
    base, adapter, out = root / "base", root / "adapter", root / "vllm"
    model.save_pretrained(base)
    tok.save_pretrained(base)
    wrapped = wrap(model, CalyrexConfig(layers=layers or [1, 2]), tokenizer=tok, seed=seed)
    if not zero:
        gen = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for p in wrapped.parameters():
                if p.requires_grad:
                    scale = 0.5 if p.dim() > 1 else 0.2
                    p.copy_(
                        (1.0 if p.dim() == 1 else 0.0)
                        + scale * torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
                    )
    wrapped.save_adapter(str(adapter))
    export_vllm(str(base), str(adapter), str(out))
    return {"base": base, "adapter": adapter, "vllm": out}
