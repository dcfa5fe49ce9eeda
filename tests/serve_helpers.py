"""Shared pieces of the serve tests: a tiny CALYREX model, references from ``model.generate``."""

from __future__ import annotations

import calyrex
from calyrex.backbones.tiny import tiny_model
from calyrex.serve.config import ServeConfig
from calyrex.serve.engine import Engine
from calyrex.serve.request import SamplingParams
from calyrex.serve.sampling import Sampler
from calyrex.span.chat import encode_chat
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


def sampled_reference(model, tok, conv, n, eos, **params) -> str:
    """The text ``Sampler(SamplingParams(**params))`` draws from ``model``'s logits, recomputed
    over the whole sequence at every step (no cache): the server's target for a sampled reply."""
    import torch

    sampler = Sampler(SamplingParams(**params))
    batch = encode_chat(tok, [conv], add_generation_prompt=True)
    ids, span, out = batch["input_ids"], batch["system_mask"], []
    with torch.no_grad():
        for _ in range(n):
            logits = model(input_ids=ids, system_mask=span).logits[0, -1].float()  # (V,)
            token = sampler(logits)
            if token in eos:
                break
            out.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], 1)
            span = torch.cat([span, torch.zeros_like(span[:, :1])], 1)
    return tok.decode(out, skip_special_tokens=True)


def conversation(user: str, system: str | None = SYSTEM) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": user}]
