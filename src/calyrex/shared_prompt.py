"""One system prompt, many conversations: run the prompt once and share its keys/values.

A server that answers many conversations under the same system prompt prefills that prompt
once (batch 1), then shares the result with every conversation of a batch:
- the backbone's self-attention keys/values of the prompt are repeated per row (HF's
  ``Cache.batch_repeat_interleave``: each row's cache grows on its own as it decodes);
- the CAL blocks' keys/values — a function of the system span only — are *viewed* once per row
  (``expand``: one copy in memory however large the batch).
Each conversation then continues from the shared cache::

    cache = calyrex.shared_prompt.prefill(model, prompt_ids, prompt_system_mask, batch=32)
    out = model(input_ids=conversations, cache=cache, use_cache=True)  # (32, T) conversations

Legend: B batch, P prompt tokens, S system span, Hkv kv heads, Dh head dim.
"""

from __future__ import annotations

from typing import Any

import torch

from . import hf
from .model import CalyrexModel
from .span import batch_repeat_interleave, cal_cache


def share(model: CalyrexModel, cache: Any, batch: int) -> Any:
    """Turn the cache of a one-row prompt prefill into the start of ``batch`` conversations."""
    if cal_cache(cache) is None:
        raise ValueError("this cache was not produced by a calyrex model: no system keys/values")
    if cal_cache(cache).batch != 1:
        raise ValueError(f"only a one-row prefill can be shared, got {cal_cache(cache).batch} rows")
    return batch_repeat_interleave(cache, batch)  # CAL keys/values: views of the one row


@torch.no_grad()
def prefill(
    model: CalyrexModel, prompt_ids: torch.Tensor, system_mask: torch.Tensor, batch: int
) -> Any:
    """Prefill the shared prompt (1, P) once; return a cache that ``batch`` conversations continue."""
    out = model(input_ids=prompt_ids, system_mask=system_mask, use_cache=True, logits_to_keep=1)
    return share(model, hf.output_cache(out), batch)
