"""Each request's system span, fixed once in vLLM's input processor and carried with the request.

``InputProcessor.process_inputs`` turns a rendered prompt into the ``EngineCoreRequest`` that
goes to the engine core. This patch fixes the request's span there, once
(:func:`calyrex.vllm.span.request_bounds`: the chat renderer's ``encode_chat`` span when the
prompt carries one, else the ids fallback), and writes the bounds where vLLM carries them:

- ``cache_salt``: cached blocks hold CAL keys/values computed with their tokens' span
  membership, and membership is a function of the whole prompt (a system prompt equal to the
  template's default is no span; a longer one starting with the same text is), so requests share
  blocks only when their spans agree (:func:`~calyrex.vllm.span.span_salt`);
- ``SamplingParams.extra_args``: vLLM hands a request's sampling params to the model runner,
  which reads the bounds there (``calyrex.vllm.runner``). Any value a client sent under that key
  (``vllm_xargs``) is overwritten.

Only generation requests carry sampling params, and only token ids carry a span: a pooling or a
prompt-embeddings request to a calyrex model is refused. Streaming-input sessions (``resumable``) are refused too: each chunk arrives here alone, so its
span could not be read from the session's whole prompt.
"""

from __future__ import annotations

from typing import Any

from ..span.markers import SpanMarkers
from .span import CHAT_SPAN, exported_markers, request_bounds, span_salt, with_span_arg

_PATCHED = "_calyrex_patched"


def carry_span(request: Any, prompt: Any, markers: SpanMarkers | None) -> Any:
    """``request`` (an ``EngineCoreRequest`` built from ``prompt``) with its span fixed and
    carried: salted, and in its sampling params' ``extra_args``."""
    if request.sampling_params is None:
        raise ValueError("calyrex.vllm serves generation requests only (no pooling)")
    if request.prompt_token_ids is None:
        raise ValueError("calyrex.vllm needs a prompt's token ids (embeddings carry no span)")
    if getattr(request, "resumable", False):
        raise ValueError("calyrex.vllm does not serve streaming-input (resumable) requests")
    carried = prompt.get(CHAT_SPAN) if isinstance(prompt, dict) else None
    bounds = request_bounds(markers, carried, request.prompt_token_ids)
    request.cache_salt = span_salt(bounds, request.cache_salt)
    params = request.sampling_params
    params.extra_args = with_span_arg(params.extra_args, bounds)
    return request


def patch(processor_cls: Any) -> None:
    """Make ``processor_cls.process_inputs`` fix and carry calyrex requests' spans (idempotent)."""
    if getattr(processor_cls, _PATCHED, False):
        return
    original = processor_cls.process_inputs

    def process_inputs(self: Any, request_id: str, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        request = original(self, request_id, prompt, *args, **kwargs)
        if not hasattr(self, "_calyrex_markers"):
            self._calyrex_markers = exported_markers(self.model_config.hf_config)
        if self._calyrex_markers is False:
            return request
        return carry_span(request, prompt, self._calyrex_markers)

    processor_cls.process_inputs = process_inputs
    setattr(processor_cls, _PATCHED, True)
