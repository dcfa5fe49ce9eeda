"""OpenAI-shaped errors: ``{"error": {"message", "type", "param", "code"}}`` with an HTTP status."""

from __future__ import annotations

from typing import Any

TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "not_found_error",
         413: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error",
         503: "server_unavailable", 500: "server_error"}  # fmt: skip
# the reason /metrics counts an error under when it has no ``code`` of its own
REASONS = {400: "invalid_request", 401: "unauthorized", 404: "not_found",
           405: "method_not_allowed", 413: "body_too_large", 429: "server_busy",
           500: "internal", 503: "unavailable"}  # fmt: skip


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

    @property
    def reason(self) -> str:
        """A short, bounded label for /metrics: the code, else one per status."""
        return self.code or reason_of(self.status)

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)


def reason_of(status: int) -> str:
    return REASONS.get(status, "client_error" if status < 500 else "server_error")


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
