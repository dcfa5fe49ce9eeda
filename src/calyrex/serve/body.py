"""A request body → JSON, with every limit checked before the work it protects.

In order: the size (``Content-Length`` first, then counted while the body streams in, so an
oversized body is never held in memory: 413), UTF-8, the nesting depth (a linear scan of the
text before ``json.loads``, whose C parser recurses), the JSON itself, then valid Unicode in
every string (a ``\\ud800`` escape decodes to a lone surrogate no tokenizer can encode).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import ClientDisconnect, Request

from .config import ServeConfig
from .errors import APIError
from .metrics import Metrics

# a JSON string, escapes included; an unterminated one runs to the end (its match never fails, so
# the scan never restarts: a tail of escaped quotes is linear too, not quadratic)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


async def read_json(request: Request, cfg: ServeConfig, metrics: Metrics) -> Any:
    """The decoded body of ``request``, or a 4xx naming the limit or the fault."""
    raw = await read_body(request, cfg.max_body_bytes, metrics)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise APIError(400, f"the request body is not UTF-8: {err}", code="invalid_json") from err
    depth = json_depth(text)
    if depth > cfg.max_json_depth:
        raise APIError(
            400,
            f"the request body nests {depth} levels of [ and {{; this server's limit is "
            f"{cfg.max_json_depth} (--max-json-depth)",
            code="json_too_deep",
        )
    try:
        body = json.loads(text)
    except ValueError as err:
        raise APIError(
            400, f"the request body is not valid JSON: {err}", code="invalid_json"
        ) from err
    if _SURROGATE_ESCAPE.search(text):
        check_unicode(body)
    return body


async def read_body(request: Request, limit: int, metrics: Metrics) -> bytes:
    """The body, read chunk by chunk; a 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    body = bytearray()
    try:
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(int(declared), limit)
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise _too_large(len(body), limit, "at least ")
    except ClientDisconnect as err:  # nobody reads the answer; counted, never a 500
        raise APIError(499, "the client left before sending its body", code="client_left") from err
    finally:
        metrics.observe("calyrex_request_body_bytes", len(body))
    return bytes(body)


def _too_large(size: int, limit: int, least: str = "") -> APIError:
    return APIError(
        413,
        f"the request body is {least}{size} bytes; this server's limit is {limit} bytes "
        "(--max-body-bytes)",
        code="body_too_large",
    )


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings, by one linear scan (no parsing).

    Exact for valid JSON. For invalid JSON it may be anything past the point where the JSON
    breaks, where ``json.loads`` stops anyway.
    """
    import numpy as np

    rest = np.frombuffer(_STRING.sub("", text).encode(), np.uint8)  # (bytes outside strings)
    if not rest.size:
        return 0
    opens = (rest == ord("[")) | (rest == ord("{"))
    closes = (rest == ord("]")) | (rest == ord("}"))
    steps = opens.astype(np.int32) - closes.astype(np.int32)
    return max(0, int(steps.cumsum().max()))  # the running count of open brackets, at its peak


def check_unicode(body: Any) -> None:
    """A 400 if a string anywhere in ``body`` is not valid Unicode (a lone surrogate)."""
    todo = [body]
    while todo:  # iterative: the depth is bounded already, but no recursion on input anyway
        value = todo.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                raise APIError(
                    400,
                    f"the request holds invalid Unicode: {err.reason} at character {err.start} "
                    f"of {value[max(0, err.start - 20) : err.start]!r}…",
                    code="invalid_unicode",
                ) from err
        elif isinstance(value, dict):
            todo += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            todo += value
