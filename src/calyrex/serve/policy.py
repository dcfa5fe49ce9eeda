"""The span policy (:mod:`calyrex.span.policy`) as this server applies it: a refusal is a 400.

The policy itself (which messages may become the system span, and what ``developer`` and later
``system`` messages become) is defined once in :mod:`calyrex.span.policy`, which the vLLM
renderer applies as well.
"""

from __future__ import annotations

from typing import Any

from ..span import policy as span_policy
from ..span.policy import ROLES, SpanPolicyError
from .config import ServeConfig
from .errors import APIError

__all__ = ["ROLES", "apply_span_policy", "message_text"]


def apply_span_policy(messages: list[dict[str, str]], cfg: ServeConfig) -> list[dict[str, str]]:
    """The conversation to render (roles system/user/assistant only), or a 400 naming the rule."""
    try:
        return span_policy.apply_span_policy(messages, cfg)
    except SpanPolicyError as err:
        raise APIError(400, err.message, param=err.param) from None


def message_text(content: Any, where: str) -> str:
    """A message content as text: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    try:
        return span_policy.message_text(content, where)
    except SpanPolicyError as err:
        raise APIError(400, err.message, param=err.param) from None
