"""Shared pieces of the serve tests: a tiny CALYREX model, references from ``model.generate``."""

from __future__ import annotations

import calyrex
from calyrex.serve.config import ServeConfig
from calyrex.serve.engine import Engine
from calyrex.span.chat import encode_chat
from calyrex.testing import tiny_model
from conftest import randomize

SYSTEM = "Always answer in capital letters."
NAME = "tiny"


def cal_model(tok, seed=1, **config):
    """A 4-layer hidden-32 Qwen2 with random CAL weights after its last two layers (``config``:
    overrides of ``tiny_config``, e.g. a longer ``max_position_embeddings``)."""
    wrapped = calyrex.wrap(
        tiny_model("qwen2", **config), calyrex.CalyrexConfig(placement="late_half"), tokenizer=tok
    )
    return randomize(wrapped, seed=seed)


def engine(model, tok, **cfg) -> Engine:
    return Engine(model, tok, ServeConfig(model_name=NAME, **cfg))


def reference(model, tok, conv, n, eos, with_span=True) -> str:
    """Greedy text of ``model.generate(**encode_chat(...))`` (the server's parity target)."""
    batch = encode_chat(tok, [conv], add_generation_prompt=True)
    if not with_span:
        batch.pop("system_mask")
    out = model.generate(
        **batch,
        do_sample=False,
        max_new_tokens=n,
        eos_token_id=sorted(eos),
        pad_token_id=tok.pad_token_id,
    )
    return tok.decode(out[0, batch["input_ids"].shape[1] :], skip_special_tokens=True)


def conversation(user: str, system: str | None = SYSTEM) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": user}]
