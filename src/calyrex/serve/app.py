"""The HTTP surface: OpenAI's chat-completions API over an :class:`~calyrex.serve.engine.Engine`.

``POST /v1/chat/completions`` (JSON or SSE, :mod:`calyrex.serve.reply`), ``GET /v1/models``,
``GET /health``, ``GET /metrics`` (Prometheus text). Every error is OpenAI-shaped JSON
(``{"error": {"message", "type", "param", "code"}}``) with its 4xx/5xx status, and is counted in
``calyrex_requests_rejected_total``; bad input is always a 4xx, never a crash.

A request's path: the API key (:mod:`~calyrex.serve.auth`), the body and its limits
(:mod:`~calyrex.serve.body`), the fields (:mod:`~calyrex.serve.request`), rendering and
tokenisation on an encoding thread (:mod:`~calyrex.serve.encoder`), the window, then the engine.
From submission on, a watcher cancels the request the moment its client disconnects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from .auth import APIKeyAuth
from .body import read_json
from .encoder import Encoder
from .engine import Engine, Event, Job
from .errors import APIError, error_body, reason_of
from .reply import Reply
from .request import ChatRequest, parse_request


def create_app(engine: Engine) -> FastAPI:
    """The FastAPI app; its lifespan starts the engine and shuts it down gracefully."""
    cfg, metrics = engine.cfg, engine.metrics
    encoder = Encoder(engine.tokenizer, cfg.encode_workers)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not engine.started:
            await run_in_threadpool(engine.start)
        yield
        encoder.shutdown()
        await run_in_threadpool(engine.shutdown)

    app = FastAPI(title="calyrex serve", lifespan=lifespan)
    app.add_middleware(APIKeyAuth, keys=cfg.api_keys, metrics=metrics)

    @app.exception_handler(APIError)
    async def api_error(request: Request, err: APIError) -> JSONResponse:
        metrics.reject(err.status, err.reason)
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        metrics.reject(err.status_code, reason_of(err.status_code))
        return JSONResponse(error_body(err.status_code, str(err.detail)), err.status_code)

    @app.exception_handler(Exception)
    async def crash(request: Request, err: Exception) -> JSONResponse:
        metrics.reject(500, "internal")
        return JSONResponse(error_body(500, f"internal error: {type(err).__name__}: {err}"), 500)

    @app.get("/health")
    async def health() -> JSONResponse:
        if engine.stopping:
            return JSONResponse({"status": "shutting down"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics_text() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": cfg.model_name, "object": "model", "created": 0, "owned_by": "calyrex"}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = parse_request(await read_json(request, cfg, metrics), cfg)
        prompt = await encoder(req.messages)
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
        reply = Reply(cfg.model_name, req.include_usage, asyncio.create_task(_watch(request, job)))
        if req.stream:
            return StreamingResponse(
                reply.stream(job, queue),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return await reply.collect(queue)

    return app


async def _watch(request: Request, job: Job) -> None:
    """Cancel ``job`` when its client disconnects (the engine drops it at its next step).

    The body has been read, so the next ASGI message is the disconnect (or the end of the
    response, when the reply cancels this task).
    """
    while (await request.receive())["type"] != "http.disconnect":
        pass
    job.cancelled.set()


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
