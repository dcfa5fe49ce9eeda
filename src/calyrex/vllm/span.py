"""The system span of vLLM's flat batches, as pure functions (no vLLM import).

vLLM's model forward sees the *scheduled* tokens of many requests in one flat batch: a chunk may
start inside a system prompt whose header was scheduled, or cached, long before. So the span is
computed once per request from its whole prompt with the project's one token-level span rule
(:func:`calyrex.markers.find_span`, ≡ :func:`calyrex.encode_chat` on the supported templates),
and each scheduled token is tested against its request's bounds by its absolute position.

Legend: R requests in the step, T scheduled tokens (padded), rows of ``bounds`` are [start, end).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..markers import SpanMarkers, find_span

NO_SPAN = (0, 0)  # bounds of a request without a system span: no position is in [0, 0)


def exported_markers(settings: dict[str, Any]) -> SpanMarkers | None:
    """The span markers a ``calyrex export-vllm`` config's ``calyrex`` entry carries, or None."""
    data = settings.get("span_markers")
    return SpanMarkers.from_dict(data) if data else None


def prompt_bounds(markers: SpanMarkers | None, prompt: Sequence[int]) -> tuple[int, int]:
    """[start, end) of the system span of one whole prompt; (0, 0) when it has none."""
    found = find_span(markers, prompt) if markers is not None else None
    return NO_SPAN if found is None else found


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
