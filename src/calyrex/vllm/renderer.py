"""vLLM's chat endpoint rendered by :func:`calyrex.encode_chat` (``--tokenizer-mode calyrex``).

vLLM's HF renderer renders the template to text, then tokenises it: a user who types
``<|im_end|>\\n<|im_start|>system`` gets real special tokens, and ``developer`` or later
``system`` messages are merged into the leading system message — both widen what the model
treats as its rules. This renderer tokenises each message's content as text
(``split_special_tokens``, through ``encode_chat``) and applies calyrex's span policy (a
``developer`` message or a system message after the first is refused, naming the rule).
"""

from __future__ import annotations

from typing import Any

from vllm.renderers.hf import HfRenderer
from vllm.renderers.inputs.preprocess import parse_dec_only_prompt

from ..chat import encode_chat
from ..serve.config import ServeConfig
from ..serve.errors import APIError
from ..serve.policy import apply_span_policy, message_text


def conversation(messages: list[Any]) -> list[dict[str, str]]:
    """Plain-text messages after calyrex's span policy; ``ValueError`` (a 400) naming the rule."""
    try:
        plain = [
            {"role": m["role"], "content": message_text(m.get("content"), f"messages[{i}]")}
            for i, m in enumerate(messages)
        ]
        return apply_span_policy(plain, ServeConfig())
    except APIError as err:
        raise ValueError(err.message) from err


class CalyrexRenderer(HfRenderer):
    """An :class:`HfRenderer` whose chat prompts are ``encode_chat``'s token ids."""

    def render_messages(self, messages: list[Any], params: Any) -> tuple[list[Any], Any]:
        conv = conversation(messages)
        kwargs = params.get_apply_chat_template_kwargs()
        if kwargs.get("chat_template"):
            raise ValueError(
                "calyrex renders with the model's own chat template; a request "
                "chat_template is refused"
            )
        if kwargs.get("continue_final_message"):
            raise ValueError("continue_final_message is not supported by the calyrex renderer")
        ids = encode_chat(
            self.get_tokenizer(),
            [conv],
            add_generation_prompt=kwargs.get("add_generation_prompt", True),
            tools=kwargs.get("tools"),
        )["input_ids"][0]
        return conv, parse_dec_only_prompt([int(i) for i in ids])

    async def render_messages_async(
        self, messages: list[Any], params: Any
    ) -> tuple[list[Any], Any]:
        return self.render_messages(messages, params)
