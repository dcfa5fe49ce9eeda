"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status."""

from __future__ import annotations

from typing import Any

TYPES = {400: "invalid_request_error", 404: "not_found_error", 413: "invalid_request_error",
         422: "invalid_request_error", 429: "rate_limit_error", 503: "server_unavailable",
         500: "server_error"}  # fmt: skip


class APIError(Exception):
    """An error a client gets back as JSON with ``status`` (never a crash, never a bare 500)."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
