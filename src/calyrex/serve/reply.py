"""One request's answer in OpenAI's shapes: a ``chat.completion``, or SSE ``chat.completion.chunk``
frames ending in ``data: [DONE]``. Events come from the engine through an :class:`asyncio.Queue`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse, Response

from .engine import Event, Job, Usage
from .errors import APIError, error_body


class Reply:
    """One request's answer; ``watch`` (the disconnect watcher) is stopped when it ends."""

    def __init__(self, model: str, include_usage: bool, watch: asyncio.Task) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.model, self.include_usage, self.watch = model, include_usage, watch
        self.created = int(time.time())

    def _head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    @staticmethod
    def usage(u: Usage) -> dict[str, Any]:
        return {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        }

    async def collect(self, queue: asyncio.Queue[Event]) -> Response:
        """The whole answer; 499 when the client went away (the engine dropped the request)."""
        parts: list[str] = []
        try:
            while (event := await queue.get()).kind == "text":
                parts.append(event.text)
        finally:
            self.watch.cancel()
        if event.kind == "error":
            raise APIError(event.status, event.text)
        if event.finish_reason == "cancelled":
            return Response(status_code=499)
        message = {"role": "assistant", "content": "".join(parts)}
        choice = {"index": 0, "message": message, "logprobs": None,
                  "finish_reason": event.finish_reason}  # fmt: skip
        body = {**self._head("chat.completion"), "choices": [choice],
                "usage": self.usage(event.usage)}  # fmt: skip
        return JSONResponse(body)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {**self._head("chat.completion.chunk"), "choices": [choice]}
        if self.include_usage:
            body["usage"] = None
        return f"data: {json.dumps(body)}\n\n"

    async def stream(self, job: Job, queue: asyncio.Queue[Event]) -> AsyncIterator[str]:
        """SSE frames; a client that goes away cancels the request (``finally``)."""
        try:
            event = await queue.get()  # the role frame goes out with the first token
            yield self._chunk({"role": "assistant", "content": ""})
            while event.kind == "text":
                yield self._chunk({"content": event.text})
                event = await queue.get()
            if event.kind == "error":  # e.g. shutdown: a clear final event, then [DONE]
                yield f"data: {json.dumps(error_body(event.status, event.text))}\n\n"
            else:
                yield self._chunk({}, event.finish_reason)
                if self.include_usage:
                    body = {**self._head("chat.completion.chunk"), "choices": [],
                            "usage": self.usage(event.usage)}  # fmt: skip
                    yield f"data: {json.dumps(body)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            job.cancelled.set()
            self.watch.cancel()
