"""The system span of vLLM's requests and flat batches, as pure functions (no vLLM import).

One place per request fixes its span, and the bounds then travel with the request:

- a chat request (``--tokenizer-mode calyrex``): the renderer renders it with ``encode_chat``
  (:func:`chat_request`) and takes the span ``encode_chat`` marks, as a :class:`ChatSpan` that
  rides in the prompt dict to vLLM's input processor;
- any other request (token ids, text, a chat prompt whose ids changed after rendering, e.g. cut
  by ``truncate_prompt_tokens``): the input processor finds the span once from the whole prompt
  with the input_ids fallback (:func:`prompt_bounds`, :func:`calyrex.span.markers.find_span`).

:func:`request_bounds` is that choice. The input processor then puts the bounds in the request's
prefix-cache salt (:func:`span_salt`) and in its ``SamplingParams.extra_args``
(:data:`SPAN_ARG`), which vLLM hands to the model runner with the request; the runner reads them
back (:func:`carried_bounds`) and tests each scheduled token against its request's bounds by its
absolute position (:func:`token_flags`): right when a chunk starts, or a prefix-cache hit ends,
inside the system prompt.

A chat request whose ids the fallback would read otherwise than ``encode_chat`` is still refused:
vLLM has routes on which only the ids travel (a separate render server, beam search, the decode
side of disaggregated prefill), and they must serve the span the chat endpoint serves.

Legend: R requests in the step, T scheduled tokens (padded), rows of ``bounds`` are [start, end).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ..span.chat import encode_one
from ..span.markers import SpanMarkers, find_span
from ..span.policy import PolicySettings, SpanPolicy, apply_span_policy, message_text

NO_SPAN = (0, 0)  # bounds of a request without a system span: no position is in [0, 0)
CHAT_SPAN = "calyrex_span"  # the prompt dict's key for the renderer's ChatSpan
SPAN_ARG = "calyrex_span"  # the SamplingParams.extra_args key for [start, end]


@dataclass(frozen=True)
class ChatSpan:
    """The span ``encode_chat`` marks in one rendered chat prompt, carried with the prompt.

    Valid for exactly ``ids``: a prompt whose ids changed after rendering gets the fallback.
    A Python object, so no JSON field of a request can forge one.
    """

    bounds: tuple[int, int]
    ids: tuple[int, ...] = field(repr=False)

    def __post_init__(self) -> None:
        start, end = self.bounds
        if not 0 <= start <= end <= len(self.ids):
            raise ValueError(f"span {self.bounds} is not inside a prompt of {len(self.ids)} ids")


def exported_markers(hf_config: Any) -> SpanMarkers | None | Literal[False]:
    """The span markers a ``calyrex export-vllm`` config's ``calyrex`` entry carries (None: the
    entry has none), or False for a model that is not a calyrex export."""
    settings = getattr(hf_config, "calyrex", None)
    if not isinstance(settings, dict):
        return False
    data = settings.get("span_markers")
    return SpanMarkers.from_dict(data) if data else None


def prompt_bounds(markers: SpanMarkers | None, prompt: Sequence[int]) -> tuple[int, int]:
    """[start, end) of the system span of one whole prompt, from its ids; (0, 0) when none."""
    found = find_span(markers, prompt) if markers is not None else None
    return NO_SPAN if found is None or found[0] == found[1] else found


def mask_bounds(mask: Sequence[int]) -> tuple[int, int]:
    """[start, end) of the 1s of a ``system_mask`` row; (0, 0) when it has none.

    ``encode_chat``'s span is one run of tokens; a mask with a gap has no bounds (ValueError).
    """
    marked = [i for i, m in enumerate(mask) if m]
    if not marked:
        return NO_SPAN
    start, end = marked[0], marked[-1] + 1
    if len(marked) != end - start:
        raise ValueError(f"the system mask is not one run of tokens: {marked}")
    return start, end


def chat_request(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    markers: SpanMarkers | None,
    add_generation_prompt: bool = True,
    tools: Sequence[dict] | None = None,
    policy: PolicySettings | None = None,
) -> tuple[list[dict[str, str]], ChatSpan]:
    """(conversation, its ids with ``encode_chat``'s span) of an OpenAI chat request.

    ``messages`` pass the span ``policy`` (default :class:`~calyrex.span.policy.SpanPolicy`; a
    refusal is a ``ValueError`` naming the rule, vLLM's 400); the ids and the span are
    ``encode_chat``'s. ``markers``: the exported ones (None for a model without CAL blocks:
    nothing to check). A request whose span from the ids (:func:`prompt_bounds`) is not
    ``encode_chat``'s is refused (module doc).
    """
    conv = apply_span_policy(
        [
            {"role": m["role"], "content": message_text(m.get("content"), f"messages[{i}]")}
            for i, m in enumerate(messages)
        ],
        policy or SpanPolicy(),
    )
    row = encode_one(tokenizer, conv, add_generation_prompt, tools=tools)
    span = ChatSpan(mask_bounds(row["system_mask"]), tuple(row["input_ids"]))
    if markers is not None and prompt_bounds(markers, span.ids) != span.bounds:
        raise ValueError(
            "calyrex cannot serve this system prompt on vLLM: its token ids do not give the "
            "span calyrex.encode_chat marks (a system message that copies the template's default "
            "prompt with another date, or text that the tokenizer merges with the template "
            "beyond what the exported span markers know), and requests that carry only ids "
            "would be served another span; rephrase the system prompt"
        )
    return conv, span


def request_bounds(
    markers: SpanMarkers | None, carried: object, ids: Sequence[int]
) -> tuple[int, int]:
    """The span of one request, fixed once: ``carried`` (the renderer's :class:`ChatSpan`) when
    it was computed for exactly these ``ids``, else the ids fallback (:func:`prompt_bounds`)."""
    if isinstance(carried, ChatSpan) and carried.ids == tuple(ids):
        return carried.bounds
    return prompt_bounds(markers, ids)


def span_salt(bounds: tuple[int, int], salt: str | None) -> str | None:
    """``salt`` with the span bounds appended; unchanged for a request without a span.

    vLLM hashes ``cache_salt`` into a prompt's first block (then chained), so requests share
    cached blocks, whose CAL keys/values depend on span membership, only when their spans agree.
    """
    if tuple(bounds) == NO_SPAN:
        return salt
    return f"{salt or ''}|calyrex-span:{bounds[0]}-{bounds[1]}"


def with_span_arg(extra: Mapping[str, Any] | None, bounds: tuple[int, int]) -> dict[str, Any]:
    """A new ``extra_args`` dict: ``extra`` (never mutated: vLLM may share it between
    requests) with :data:`SPAN_ARG` set to ``bounds``, over any value a client sent."""
    return {**(extra or {}), SPAN_ARG: [int(bounds[0]), int(bounds[1])]}


def carried_bounds(extra: Mapping[str, Any] | None, request_id: str) -> tuple[int, int]:
    """The bounds :func:`with_span_arg` put in a request's ``extra_args`` (the model runner's
    read); a RuntimeError when they are missing."""
    value = (extra or {}).get(SPAN_ARG)
    if not (isinstance(value, (list, tuple)) and len(value) == 2):
        raise RuntimeError(
            f"request {request_id} reached the calyrex model without its system span: it did not "
            "pass vLLM's input processor with the calyrex plugin loaded (an EngineCoreRequest "
            "handed to the engine directly?)"
        )
    return int(value[0]), int(value[1])


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
