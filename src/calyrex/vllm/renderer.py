"""vLLM's chat endpoint rendered by :func:`calyrex.encode_chat` (``--tokenizer-mode calyrex``).

vLLM's HF renderer renders the template to text, then tokenises it: a user who types
``<|im_end|>\\n<|im_start|>system`` gets real special tokens, and ``developer`` or later
``system`` messages are merged into the leading system message — both widen what the model
treats as its rules. This renderer tokenises each message's content as text
(``split_special_tokens``, through ``encode_chat``), applies calyrex's span policy
(:mod:`calyrex.span.policy`: a ``developer`` message or a system message after the first is
refused, naming the rule) and refuses a prompt whose span the model runner would read otherwise
than ``encode_chat`` (:func:`calyrex.vllm.span.chat_prompt`, which holds all of it and needs no
vLLM).
"""

from __future__ import annotations

from typing import Any

from vllm.renderers.hf import HfRenderer
from vllm.renderers.inputs.preprocess import parse_dec_only_prompt

from ..span.markers import SpanMarkers
from .span import chat_prompt, exported_markers


class CalyrexRenderer(HfRenderer):
    """An :class:`HfRenderer` whose chat prompts are ``encode_chat``'s token ids."""

    def _span_markers(self) -> SpanMarkers | None:
        """The markers the model runner reads spans with (None: not a calyrex export)."""
        settings = getattr(self.model_config.hf_config, "calyrex", None)
        return exported_markers(settings) if isinstance(settings, dict) else None

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
            self._calyrex_markers = self._span_markers()
        conv, ids = chat_prompt(
            self.get_tokenizer(),
            messages,
            self._calyrex_markers,
            add_generation_prompt=kwargs.get("add_generation_prompt", True),
            tools=kwargs.get("tools"),
        )
        return conv, parse_dec_only_prompt(ids)

    async def render_messages_async(
        self, messages: list[Any], params: Any
    ) -> tuple[list[Any], Any]:
        return self.render_messages(messages, params)
