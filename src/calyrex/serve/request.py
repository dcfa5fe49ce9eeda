"""A chat-completions request body → a validated :class:`ChatRequest`, or a 4xx naming the field.

Accepted: ``messages``, ``model``, ``max_tokens`` / ``max_completion_tokens``, ``temperature``,
``top_p``, ``stop``, ``seed``, ``stream``, ``stream_options.include_usage``, ``n`` = 1,
``cache_salt`` and ``ignore_eos`` (vLLM's extensions). Fields this server cannot honour (``n`` > 1, tools, logprobs, JSON mode, penalties,
logit bias) are a 400 rather than silently ignored; other fields (``user``, ``metadata``, ...)
change nothing and are ignored.
"""

from __future__ import annotations

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


@dataclass
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


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
            f"the model {model!r} does not exist; this server serves {cfg.model_name!r}",
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
        messages=apply_span_policy(_messages(body.get("messages")), cfg),
        max_tokens=_max_tokens(body),
        sampling=SamplingParams(
            temperature=_number(body, "temperature", float, 0.0, 2.0, default=1.0),
            top_p=_number(body, "top_p", float, 0.0, 1.0, default=1.0, open_low=True),
            seed=_number(body, "seed", int, -(2**63), 2**64 - 1, default=None),
        ),
        stop=_stop(body.get("stop"), cfg.max_stop),
        stream=stream,
        include_usage=bool(options and _flag(options, "include_usage", "stream_options.")),
        cache_salt=_string(body, "cache_salt"),
        ignore_eos=_flag(body, "ignore_eos"),
    )


def _messages(messages: Any) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise APIError(400, "messages must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise APIError(400, f"{where} must be an object", param=where)
        role = m.get("role")
        if role not in ROLES:
            raise APIError(
                400,
                f"{where}.role is {role!r}; supported roles: {', '.join(ROLES)}",
                param=f"{where}.role",
            )
        if m.get("tool_calls") or m.get("function_call"):
            raise APIError(400, f"{where}: tool calls are not supported", param=where)
        out.append({"role": role, "content": message_text(m.get("content"), f"{where}.content")})
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
    if kind is int:
        ok = ok and float(value).is_integer()
    if not ok:
        what = "an integer" if kind is int else "a number"
        raise APIError(400, f"{name} must be {what}, got {value!r}", param=name)
    if value < low or value > high or (open_low and value == low):
        side = "(" if open_low else "["
        raise APIError(400, f"{name} must be in {side}{low}, {high}], got {value!r}", param=name)
    return kind(value)


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


def _stop(stop: Any, limit: int) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise APIError(400, "stop must be a non-empty string or a list of them", param="stop")
    if len(stops) > limit:
        raise APIError(400, f"stop takes at most {limit} strings, got {len(stops)}", param="stop")
    return stops
