"""API keys: ``Authorization: Bearer <key>`` on every route but ``/health`` (as vLLM and OpenAI).

Keys come from ``--api-key`` (several allowed) and ``CALYREX_API_KEY`` (comma-separated); they are
compared in constant time (:func:`hmac.compare_digest`, against every key) and never printed or
logged. A server bound beyond loopback without a key says so loudly at start.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from typing import Any

from starlette.responses import JSONResponse

from .errors import error_body
from .metrics import Metrics

ENV = "CALYREX_API_KEY"
OPEN = ("/health",)  # routes a load balancer probes without a key


def api_keys(flags: Sequence[str] | None, env: str | None) -> tuple[str, ...]:
    """The keys a server accepts: ``--api-key`` values, then the comma-separated ``env``."""
    keys = [*(flags or []), *(env or "").split(",")]
    return tuple(dict.fromkeys(k.strip() for k in keys if k.strip()))


def bind_warning(host: str, keys: Sequence[str]) -> str | None:
    """A warning for a server that anyone on the network may use, else None."""
    if keys or host == "localhost" or _loopback(host):
        return None
    return (
        f"WARNING: calyrex serve listens on {host} without an API key: anyone who can reach this "
        f"port can run the model and read /metrics. Set --api-key (or {ENV}), or bind 127.0.0.1 "
        "behind a proxy that authenticates."
    )


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authorized(header: bytes, keys: Sequence[bytes]) -> bool:
    """Whether ``header`` is ``Bearer <one of keys>``; every key is compared, in constant time."""
    scheme, _, token = header.partition(b" ")
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(token.strip(), key)
    return ok and scheme.lower() == b"bearer"


class APIKeyAuth:
    """ASGI middleware: a 401 (OpenAI-shaped) unless the request carries a valid key."""

    def __init__(self, app: Any, keys: Sequence[str], metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics
        self.keys = [k.encode() for k in keys]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.keys or self._open(scope):
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"authorization", b"")
        if authorized(header, self.keys):
            return await self.app(scope, receive, send)
        self.metrics.reject(401, "unauthorized")
        message = "a valid API key is required (Authorization: Bearer <key>)"
        body = error_body(401, message, code="invalid_api_key")
        reply = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await reply(scope, receive, send)

    @staticmethod
    def _open(scope: dict[str, Any]) -> bool:
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        return path in OPEN
