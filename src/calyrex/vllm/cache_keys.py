"""Prefix-cache keys that include the system span (a patch of vLLM's input processor).

A cached block holds CAL keys/values computed with its tokens' span membership. Membership is
a function of the whole prompt (a system prompt equal to the template's default is no span; a
longer one starting with the same text is), so two requests can share a block's tokens and
still disagree on which of them are span. vLLM hashes blocks by tokens and ``cache_salt``
(first block, then chained), so the span bounds join the salt: requests share cached blocks
only when their spans agree. Requests without a span keep their salt unchanged.
"""

from __future__ import annotations

from typing import Any

from ..span.markers import SpanMarkers
from .span import NO_SPAN, exported_markers, prompt_bounds

_PATCHED = "_calyrex_patched"


def span_salt(bounds: tuple[int, int], salt: str | None) -> str | None:
    """``salt`` with the span bounds appended; unchanged for a request without a span."""
    if tuple(bounds) == NO_SPAN:
        return salt
    return f"{salt or ''}|calyrex-span:{bounds[0]}-{bounds[1]}"


def _markers(model_config: Any) -> SpanMarkers | None | bool:
    """The exported markers, or False for a model that is not a calyrex export."""
    settings = getattr(model_config.hf_config, "calyrex", None)
    return exported_markers(settings) if isinstance(settings, dict) else False


def patch(processor_cls: Any) -> None:
    """Make ``processor_cls.process_inputs`` salt calyrex requests by their span (idempotent)."""
    if getattr(processor_cls, _PATCHED, False):
        return
    original = processor_cls.process_inputs

    def process_inputs(self: Any, *args: Any, **kwargs: Any) -> Any:
        request = original(self, *args, **kwargs)
        if not hasattr(self, "_calyrex_markers"):
            self._calyrex_markers = _markers(self.model_config)
        if self._calyrex_markers is not False and request.prompt_token_ids is not None:
            bounds = prompt_bounds(self._calyrex_markers, request.prompt_token_ids)
            request.cache_salt = span_salt(bounds, request.cache_salt)
        return request

    processor_cls.process_inputs = process_inputs
    setattr(processor_cls, _PATCHED, True)
