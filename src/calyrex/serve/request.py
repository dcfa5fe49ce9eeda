"""A chat-completions request body → a validated :class:`ChatRequest`, or a 4xx naming the field.

Accepted: ``messages``, ``model``, ``max_tokens`` / ``max_completion_tokens``, ``temperature``,
``top_p``, ``stop``, ``seed``, ``stream``, ``stream_options.include_usage``, ``n`` = 1,
``cache_salt`` and ``ignore_eos`` (vLLM's extensions). Fields this server cannot honour (``n`` >
1, tools, logprobs, JSON mode, penalties, logit bias) are a 400 rather than silently ignored;
other fields (``user``, ``metadata``, ...) change nothing and are ignored. Numbers must be finite
and in range; the number of messages and each one's length are bounded (``ServeConfig``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .config import ServeConfig
from .errors import APIError
from .policy import ROLES, apply_span_policy, message_text

# field → values that mean "not used" (anything else is a 400: this server cannot honour it)
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "response_format": (None, {"type": "text"}),
    "audio": (None,),
    "prediction": (None,),
    "modalities": (None, ["text"]),
}


GREEDY = 1e-5  # vLLM's epsilon: logits / 5e-324 overflow to inf, and softmax to NaN


@dataclass
class SamplingParams:
    temperature: float = 1.0  # below GREEDY: greedy
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY


@dataclass
class ChatRequest:
    messages: list[dict[str, str]]  # after the span policy: system (leading) / user / assistant
    max_tokens: int | None = None  # None: the server default, capped by the window
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    cache_salt: str = ""
    ignore_eos: bool = False  # vLLM's extension: run to max_tokens (benchmarks)


def parse_request(body: Any, cfg: ServeConfig) -> ChatRequest:
    """Validate a decoded JSON body; every problem is an :class:`APIError` with a 4xx status."""
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise APIError(400, "model must be a string", param="model")
    if model is not None and model != cfg.model_name:
        raise APIError(
            404,
            f"the model {_show(model)} does not exist; this server serves {cfg.model_name!r}",
            param="model",
            code="model_not_found",
        )
    for name, unused in UNSUPPORTED.items():
        if body.get(name) not in unused:
            raise APIError(400, f"{name} is not supported by this server", param=name)
    n = _number(body, "n", int, 1, 2**31)
    if n != 1:
        raise APIError(400, f"n must be 1 (got {n}): one choice per request", param="n")
    stream = _flag(body, "stream")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise APIError(
            400, "stream_options must be an object and needs stream: true", param="stream_options"
        )
    return ChatRequest(
        messages=apply_span_policy(_messages(body.get("messages"), cfg), cfg),
        max_tokens=_max_tokens(body),
        sampling=SamplingParams(
            temperature=_number(body, "temperature", float, 0.0, 2.0, default=1.0),
            top_p=_number(body, "top_p", float, 0.0, 1.0, default=1.0, open_low=True),
            seed=_number(body, "seed", int, -(2**63), 2**64 - 1, default=None),
        ),
        stop=_stop(body.get("stop"), cfg),
        stream=stream,
        include_usage=bool(options and _flag(options, "include_usage", "stream_options.")),
        cache_salt=_string(body, "cache_salt"),
        ignore_eos=_flag(body, "ignore_eos"),
    )


def _messages(messages: Any, cfg: ServeConfig) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise APIError(400, "messages must be a non-empty list", param="messages")
    if len(messages) > cfg.max_messages:
        raise APIError(
            400,
            f"messages holds {len(messages)} messages; this server's limit is "
            f"{cfg.max_messages} (--max-messages)",
            param="messages",
            code="too_many_messages",
        )
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise APIError(400, f"{where} must be an object", param=where)
        role = m.get("role")
        if role not in ROLES:
            raise APIError(
                400,
                f"{where}.role is {_show(role)}; supported roles: {', '.join(ROLES)}",
                param=f"{where}.role",
            )
        if m.get("tool_calls") or m.get("function_call"):
            raise APIError(400, f"{where}: tool calls are not supported", param=where)
        text = message_text(m.get("content"), f"{where}.content")
        if len(text) > cfg.max_message_chars:
            raise APIError(
                400,
                f"{where}.content is {len(text)} characters; this server's limit is "
                f"{cfg.max_message_chars} (--max-message-chars)",
                param=f"{where}.content",
                code="message_too_long",
            )
        out.append({"role": role, "content": text})
    return out


def _max_tokens(body: dict[str, Any]) -> int | None:
    a = _number(body, "max_tokens", int, 1, 2**31, default=None)
    b = _number(body, "max_completion_tokens", int, 1, 2**31, default=None)
    if a is not None and b is not None and a != b:
        raise APIError(
            400, f"max_tokens ({a}) and max_completion_tokens ({b}) disagree", param="max_tokens"
        )
    return a if a is not None else b


def _number(
    body: dict[str, Any],
    name: str,
    kind: type,
    low: float,
    high: float,
    default: Any = 1,
    open_low: bool = False,
) -> Any:
    value = body.get(name)
    if value is None:
        return default
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and isinstance(value, float) and not math.isfinite(value):  # NaN, Infinity, 1e999
        raise APIError(400, f"{name} must be a finite number, got {_show(value)}", param=name)
    if kind is int:
        ok = ok and (isinstance(value, int) or value.is_integer())
    if not ok:
        what = "an integer" if kind is int else "a number"
        raise APIError(400, f"{name} must be {what}, got {_show(value)}", param=name)
    if value < low or value > high or (open_low and value == low):
        side = "(" if open_low else "["
        raise APIError(
            400, f"{name} must be in {side}{low}, {high}], got {_show(value)}", param=name
        )
    return kind(value)


def _show(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error message never echoes a whole body."""
    text = repr(value) if not isinstance(value, (list, dict)) else type(value).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def _flag(body: dict[str, Any], name: str, prefix: str = "") -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise APIError(400, f"{prefix}{name} must be true or false", param=prefix + name)
    return value


def _string(body: dict[str, Any], name: str) -> str:
    value = body.get(name) or ""
    if not isinstance(value, str):
        raise APIError(400, f"{name} must be a string", param=name)
    return value


def _stop(stop: Any, cfg: ServeConfig) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise APIError(400, "stop must be a non-empty string or a list of them", param="stop")
    if len(stops) > cfg.max_stop:
        raise APIError(
            400, f"stop takes at most {cfg.max_stop} strings, got {len(stops)}", param="stop"
        )
    if max(map(len, stops), default=0) > cfg.max_stop_chars:
        raise APIError(
            400, f"each stop string may have at most {cfg.max_stop_chars} characters", param="stop"
        )
    return stops
