"""The system span of vLLM's requests and flat batches, as pure functions (no vLLM import).

vLLM's model forward sees the *scheduled* tokens of many requests in one flat batch: a chunk may
start inside a system prompt whose header was scheduled, or cached, long before. So the span is
computed once per request from its whole prompt ids with the input_ids fallback
(:func:`calyrex.span.markers.find_span`), and each scheduled token is tested against its request's
bounds by its absolute position.

The span rule is :func:`calyrex.encode_chat`'s. A chat request is rendered by
:func:`chat_prompt` (the renderer, ``calyrex.vllm.renderer``): the span policy, then
``encode_chat``'s ids, and a request whose ids would give the model runner another span than
``encode_chat``'s is refused, so the span vLLM serves is ``encode_chat``'s, token for token.

Legend: R requests in the step, T scheduled tokens (padded), rows of ``bounds`` are [start, end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..span.chat import encode_one
from ..span.markers import SpanMarkers, find_span
from ..span.policy import PolicySettings, SpanPolicy, apply_span_policy, message_text

NO_SPAN = (0, 0)  # bounds of a request without a system span: no position is in [0, 0)


def exported_markers(settings: dict[str, Any]) -> SpanMarkers | None:
    """The span markers a ``calyrex export-vllm`` config's ``calyrex`` entry carries, or None."""
    data = settings.get("span_markers")
    return SpanMarkers.from_dict(data) if data else None


def prompt_bounds(markers: SpanMarkers | None, prompt: Sequence[int]) -> tuple[int, int]:
    """[start, end) of the system span of one whole prompt; (0, 0) when it has none."""
    found = find_span(markers, prompt) if markers is not None else None
    return NO_SPAN if found is None else found


def chat_prompt(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    markers: SpanMarkers | None,
    add_generation_prompt: bool = True,
    tools: Sequence[dict] | None = None,
    policy: PolicySettings | None = None,
) -> tuple[list[dict[str, str]], list[int]]:
    """(conversation, prompt ids) of an OpenAI chat request, as the calyrex renderer serves it.

    ``messages`` pass the span ``policy`` (default :class:`~calyrex.span.policy.SpanPolicy`; a
    refusal is a ``ValueError`` naming the rule, vLLM's 400); the ids are ``encode_chat``'s.
    ``markers``: those the model runner finds the span with (None for a model without CAL
    blocks: nothing to check). A request whose span from the ids (:func:`prompt_bounds`) is not
    ``encode_chat``'s is refused: vLLM never serves another span than ``encode_chat``'s.
    """
    conv = apply_span_policy(
        [
            {"role": m["role"], "content": message_text(m.get("content"), f"messages[{i}]")}
            for i, m in enumerate(messages)
        ],
        policy or SpanPolicy(),
    )
    row = encode_one(tokenizer, conv, add_generation_prompt, tools=tools)
    ids = row["input_ids"]
    if markers is not None:
        start, end = prompt_bounds(markers, ids)
        if [int(start <= i < end) for i in range(len(ids))] != row["system_mask"]:
            raise ValueError(
                "calyrex cannot serve this system prompt on vLLM: the model runner finds the "
                "system span from token ids, and for this prompt they do not give the span "
                "calyrex.encode_chat marks (a system message that copies the template's default "
                "prompt with another date, or text that the tokenizer merges with the template "
                "beyond what the exported span markers know); rephrase the system prompt"
            )
    return conv, ids


def token_flags(
    bounds: torch.Tensor, query_start_loc: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """(T,) bool: scheduled token t lies in its request's span.

    ``bounds`` (R, 2) long, ``query_start_loc`` (R+1,) the first flat index of each request's
    tokens (vLLM's ``query_start_loc``; padding tokens past ``query_start_loc[-1]`` are never
    span), ``positions`` (T,) absolute positions in each request::

        bounds [[2, 5], [0, 0]]   query_start_loc [0, 4, 6]   positions 0 1 2 3 7 8 (+ pad 0)
        → flags                                                        0 0 1 1 0 0    0
    """
    t = positions.shape[0]
    if bounds.shape[0] == 0:
        return torch.zeros(t, dtype=torch.bool, device=positions.device)
    index = torch.arange(t, device=positions.device)
    qsl = query_start_loc.to(device=positions.device, dtype=torch.long)
    request = torch.searchsorted(qsl[1:], index, right=True).clamp(max=bounds.shape[0] - 1)
    span = bounds.to(positions.device)[request]  # (T, 2)
    pos = positions.long()
    return (pos >= span[:, 0]) & (pos < span[:, 1]) & (index < qsl[-1])
