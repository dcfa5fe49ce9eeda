"""vLLM's chat endpoint rendered by :func:`calyrex.encode_chat` (``--tokenizer-mode calyrex``).

vLLM's HF renderer renders the template to text, then tokenises it: a user who types
``<|im_end|>\\n<|im_start|>system`` gets real special tokens, and ``developer`` or later
``system`` messages are merged into the leading system message — both widen what the model
treats as its rules. This renderer tokenises each message's content as text
(``split_special_tokens``, through ``encode_chat``), applies calyrex's span policy
(:mod:`calyrex.span.policy`: a ``developer`` message or a system message after the first is
refused, naming the rule) and refuses a prompt whose span the ids fallback would read otherwise
than ``encode_chat`` (:func:`calyrex.vllm.span.chat_request`, which holds all of it and needs no
vLLM).

The span ``encode_chat`` marks leaves the renderer with the prompt: a
:class:`~calyrex.vllm.span.ChatSpan` under the prompt dict's ``calyrex_span`` key, copied into
the engine input (vLLM's own conversion keeps only the keys it knows), where the input
processor takes it (``calyrex.vllm.inputs``).
"""

from __future__ import annotations

from typing import Any

from vllm.renderers.hf import HfRenderer
from vllm.renderers.inputs.preprocess import parse_dec_only_prompt

from .span import CHAT_SPAN, chat_request, exported_markers


def _with_span(prompt: Any, engine_input: Any) -> Any:
    """``engine_input`` with the renderer's span of ``prompt``, when it has one."""
    if isinstance(prompt, dict) and CHAT_SPAN in prompt:
        engine_input[CHAT_SPAN] = prompt[CHAT_SPAN]
    return engine_input


class CalyrexRenderer(HfRenderer):
    """An :class:`HfRenderer` whose chat prompts are ``encode_chat``'s ids and span."""

    def render_messages(self, messages: list[Any], params: Any) -> tuple[list[Any], Any]:
        kwargs = params.get_apply_chat_template_kwargs()
        if kwargs.get("chat_template"):
            raise ValueError(
                "calyrex renders with the model's own chat template; a request "
                "chat_template is refused"
            )
        if kwargs.get("continue_final_message"):
            raise ValueError("continue_final_message is not supported by the calyrex renderer")
        if not hasattr(self, "_calyrex_markers"):
            markers = exported_markers(self.model_config.hf_config)
            self._calyrex_markers = None if markers is False else markers  # None: no check
        conv, span = chat_request(
            self.get_tokenizer(),
            messages,
            self._calyrex_markers,
            add_generation_prompt=kwargs.get("add_generation_prompt", True),
            tools=kwargs.get("tools"),
        )
        return conv, parse_dec_only_prompt({"prompt_token_ids": list(span.ids), CHAT_SPAN: span})

    async def render_messages_async(
        self, messages: list[Any], params: Any
    ) -> tuple[list[Any], Any]:
        return self.render_messages(messages, params)

    def process_for_engine(self, prompt: Any, arrival_time: float, **kwargs: Any) -> Any:
        return _with_span(prompt, super().process_for_engine(prompt, arrival_time, **kwargs))

    async def process_for_engine_async(
        self, prompt: Any, arrival_time: float, **kwargs: Any
    ) -> Any:
        engine_input = await super().process_for_engine_async(prompt, arrival_time, **kwargs)
        return _with_span(prompt, engine_input)
