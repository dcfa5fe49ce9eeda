"""The HTTP surface: OpenAI's chat-completions API over an :class:`~calyrex.serve.engine.Engine`.

``POST /v1/chat/completions`` (JSON or SSE ``chat.completion.chunk`` frames ending in
``data: [DONE]``), ``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus text).
Every error is OpenAI-shaped JSON (``{"error": {"message", "type", "param", "code"}}``) with its
4xx/5xx status; bad input is always a 4xx, never a crash.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..render import ChatTemplateError
from .engine import Engine, Event, Job, Usage
from .errors import APIError, error_body
from .prompt import Prompt, encode_prompt
from .request import ChatRequest, parse_request


def create_app(engine: Engine) -> FastAPI:
    """The FastAPI app; its lifespan starts the engine and shuts it down gracefully."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not engine.started:
            await run_in_threadpool(engine.start)
        yield
        await run_in_threadpool(engine.shutdown)

    app = FastAPI(title="calyrex serve", lifespan=lifespan)
    cfg = engine.cfg

    @app.exception_handler(APIError)
    async def api_error(request: Request, err: APIError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        return JSONResponse(error_body(err.status_code, str(err.detail)), err.status_code)

    @app.exception_handler(Exception)
    async def crash(request: Request, err: Exception) -> JSONResponse:
        return JSONResponse(error_body(500, f"internal error: {type(err).__name__}: {err}"), 500)

    @app.get("/health")
    async def health() -> JSONResponse:
        if engine.stopping:
            return JSONResponse({"status": "shutting down"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(engine.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": cfg.model_name, "object": "model", "created": 0, "owned_by": "calyrex"}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError) as err:
            raise APIError(400, f"the request body is not valid JSON: {err}") from err
        req = parse_request(body, cfg)
        prompt = await run_in_threadpool(_encode, engine, req)
        max_tokens = _max_tokens(engine, req, len(prompt.input_ids))
        queue: asyncio.Queue[Event] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def emit(event: Event) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # the event loop is gone (server stopped)
                pass

        job = Job(prompt, max_tokens, emit, req.sampling, req.stop, req.cache_salt, req.ignore_eos)
        engine.submit(job)
        reply = Reply(cfg.model_name, req.include_usage)
        if req.stream:
            return StreamingResponse(
                reply.stream(job, queue),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return await reply.collect(job, queue, request)

    return app


def _encode(engine: Engine, req: ChatRequest) -> Prompt:
    try:
        with engine.encode_lock:
            return encode_prompt(engine.tokenizer, req.messages)
    except ChatTemplateError as err:
        raise APIError(400, f"the chat template rejected the conversation: {err}") from err


def _max_tokens(engine: Engine, req: ChatRequest, prompt: int) -> int:
    """The request's completion budget; a 400 naming both lengths when it does not fit."""
    window = engine.window
    if prompt >= window:
        raise APIError(
            400,
            f"the conversation is {prompt} tokens but the model's window is {window} tokens",
            param="messages",
            code="context_length_exceeded",
        )
    if req.max_tokens is not None and prompt + req.max_tokens > window:
        raise APIError(
            400,
            f"the conversation is {prompt} tokens and max_tokens is {req.max_tokens}: "
            f"{prompt + req.max_tokens} tokens exceed the model's window of {window} tokens",
            param="max_tokens",
            code="context_length_exceeded",
        )
    return req.max_tokens or min(engine.cfg.default_max_tokens, window - prompt)


class Reply:
    """One request's answer in OpenAI's shapes, whole or as SSE chunks."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.model, self.include_usage = model, include_usage
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

    async def collect(self, job: Job, queue: asyncio.Queue[Event], request: Request) -> Response:
        parts: list[str] = []
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), timeout=0.25)
            except TimeoutError:
                if await request.is_disconnected():
                    job.cancelled.set()  # stops at the engine's next step
                    return Response(status_code=499)
                continue
            if event.kind == "text":
                parts.append(event.text)
            elif event.kind == "error":
                raise APIError(event.status, event.text)
            else:
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
