"""The span policy: which text of a request may become the privileged system span.

calyrex gives the CAL blocks keys/values from exactly one place, the content of a *leading*
system message (``calyrex.chat``). A server decides what its clients may put there:

- a leading ``system`` message is the span (unless the operator pinned one, below);
- ``developer`` messages: ``reject`` (400, the default), ``system`` (a *leading* developer
  message is the system prompt; any other is rejected) or ``user`` (rendered as a user turn,
  outside the span);
- a ``system`` message after the first message: ``reject`` (400, the default) or ``user``;
- ``--system-prompt FILE`` pins the operator's prompt as the span of every request; a client
  system message (or developer message mapped to system) is rejected (400, the default) or
  overridden (dropped, the pinned prompt takes its place).

Nothing is ever merged into the span: vLLM's and HF's renderers fold developer and later system
messages into position 0, which silently widens what the model treats as its rules.
"""

from __future__ import annotations

from typing import Any

from .config import ServeConfig
from .errors import APIError

ROLES = ("system", "developer", "user", "assistant")


def apply_span_policy(messages: list[dict[str, str]], cfg: ServeConfig) -> list[dict[str, str]]:
    """The conversation to render (roles system/user/assistant only), or a 400 naming the rule."""
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "developer":
            role = _developer(i, cfg)
        elif role == "system" and i > 0:
            if cfg.later_system == "reject":
                raise APIError(
                    400,
                    f"messages[{i}] is a system message after the first message; only a leading "
                    "system message is the system prompt (this server rejects later ones)",
                    param=f"messages[{i}].role",
                )
            role = "user"
        out.append({"role": role, "content": m["content"]})
    if cfg.system_prompt is not None:
        if out and out[0]["role"] == "system":
            if cfg.client_system == "reject":
                raise APIError(
                    400,
                    "this server pins its system prompt; remove the system message (messages[0])",
                    param="messages[0].role",
                )
            out = out[1:]  # overridden: the operator's prompt takes its place
        out = [{"role": "system", "content": cfg.system_prompt}, *out]
    return out


def _developer(index: int, cfg: ServeConfig) -> str:
    if cfg.developer_role == "user":
        return "user"
    if cfg.developer_role == "system" and index == 0:
        return "system"
    why = "only a leading one" if cfg.developer_role == "system" else "none"
    raise APIError(
        400,
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
                raise APIError(
                    400, f"{where}[{j}]: only text content parts are supported", param=where
                )
            if not isinstance(part.get("text"), str):
                raise APIError(400, f"{where}[{j}].text must be a string", param=where)
            parts.append(part["text"])
        return "\n".join(parts)
    raise APIError(400, f"{where} must be a string or a list of text parts", param=where)
