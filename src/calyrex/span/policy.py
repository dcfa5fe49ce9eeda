"""The span policy: which text of a request may become the privileged system span.

calyrex gives the CAL blocks keys/values from exactly one place, the content of a *leading*
system message (``calyrex.span.chat``). A server decides what its clients may put there:

- a leading ``system`` message is the span (unless the operator pinned one, below);
- ``developer`` messages: ``reject`` (the default), ``system`` (a *leading* developer message is
  the system prompt; any other is rejected) or ``user`` (rendered as a user turn, outside the
  span);
- a ``system`` message after the first message: ``reject`` (the default) or ``user``;
- a pinned ``system_prompt`` (``calyrex serve --system-prompt FILE``) is the span of every
  request; a client system message (or developer message mapped to system) is rejected (the
  default) or overridden (dropped, the pinned prompt takes its place).

Nothing is ever merged into the span: vLLM's and HF's renderers fold developer and later system
messages into position 0, which silently widens what the model treats as its rules. Both
servers apply this one policy (``calyrex.serve`` answers a :class:`SpanPolicyError` with a 400,
``calyrex.vllm``'s renderer raises it as the ``ValueError`` vLLM turns into one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

ROLES = ("system", "developer", "user", "assistant")
DEVELOPER_ROLE = ("reject", "system", "user")  # what a ``developer`` message becomes
LATER_SYSTEM = ("reject", "user")  # what a system message after the first message becomes
CLIENT_SYSTEM = ("reject", "override")  # a client system message under a pinned prompt


class SpanPolicyError(ValueError):
    """A request the policy refuses; ``param`` names the offending field (OpenAI's ``param``)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param = message, param


class PolicySettings(Protocol):
    """What the policy reads: :class:`SpanPolicy`, or ``calyrex.serve``'s ``ServeConfig``."""

    system_prompt: str | None
    client_system: str
    developer_role: str
    later_system: str


@dataclass(frozen=True)
class SpanPolicy:
    system_prompt: str | None = None  # the operator's pinned system prompt
    client_system: str = "reject"  # under a pinned prompt: reject or override client system text
    developer_role: str = "reject"  # reject | system (a leading one is the prompt) | user
    later_system: str = "reject"  # reject | user

    def __post_init__(self) -> None:
        check_settings(self)


def check_settings(cfg: PolicySettings) -> None:
    """``ValueError`` naming a policy field whose value is not one of its choices."""
    for name, allowed in (
        ("client_system", CLIENT_SYSTEM),
        ("developer_role", DEVELOPER_ROLE),
        ("later_system", LATER_SYSTEM),
    ):
        if getattr(cfg, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(cfg, name)!r}")


def apply_span_policy(messages: list[dict[str, str]], cfg: PolicySettings) -> list[dict[str, str]]:
    """The conversation to render (roles system/user/assistant only), or a
    :class:`SpanPolicyError` naming the rule."""
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "developer":
            role = _developer(i, cfg)
        elif role == "system" and i > 0:
            if cfg.later_system == "reject":
                raise SpanPolicyError(
                    f"messages[{i}] is a system message after the first message; only a leading "
                    "system message is the system prompt (this server rejects later ones)",
                    param=f"messages[{i}].role",
                )
            role = "user"
        out.append({"role": role, "content": m["content"]})
    if cfg.system_prompt is not None:
        if out and out[0]["role"] == "system":
            if cfg.client_system == "reject":
                raise SpanPolicyError(
                    "this server pins its system prompt; remove the system message (messages[0])",
                    param="messages[0].role",
                )
            out = out[1:]  # overridden: the operator's prompt takes its place
        out = [{"role": "system", "content": cfg.system_prompt}, *out]
    return out


def _developer(index: int, cfg: PolicySettings) -> str:
    if cfg.developer_role == "user":
        return "user"
    if cfg.developer_role == "system" and index == 0:
        return "system"
    why = "only a leading one" if cfg.developer_role == "system" else "none"
    raise SpanPolicyError(
        f"messages[{index}] has role 'developer'; this server accepts {why} (developer_role="
        f"{cfg.developer_role}): send its text as the leading system message or as a user "
        "message",
        param=f"messages[{index}].role",
    )


def message_text(content: Any, where: str) -> str:
    """A message content as text: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise SpanPolicyError(
                    f"{where}[{j}]: only text content parts are supported", param=where
                )
            if not isinstance(part.get("text"), str):
                raise SpanPolicyError(f"{where}[{j}].text must be a string", param=where)
            parts.append(part["text"])
        return "\n".join(parts)
    raise SpanPolicyError(f"{where} must be a string or a list of text parts", param=where)
