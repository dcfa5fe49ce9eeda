"""``calyrex serve``: the options are this function's signature (see calyrex/cli/__init__.py)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from .config import ServeConfig


def serve(
    model: str,
    adapter: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    system_prompt: str | None = None,
    client_system: str = "reject",
    developer_role: str = "reject",
    later_system: str = "reject",
    max_concurrency: int = 8,
    max_queue: int = 64,
    cache_bytes: int = 1 << 30,
    cache_salt: str = "",
    served_model_name: str | None = None,
    dtype: str = "auto",
    device: str | None = None,
    shutdown_grace: float = 10.0,
    api_key: list[str] | None = None,
    max_body_bytes: int = 8 << 20,
    max_messages: int = 2048,
    max_message_chars: int = 1 << 20,
    max_json_depth: int = 64,
) -> int:
    """Serve MODEL (+ ADAPTER) behind an OpenAI-compatible API (/v1/chat/completions).

    --system-prompt FILE pins the operator's system prompt (client system messages are rejected,
    or replaced with --client-system override). --developer-role reject|system|user and
    --later-system reject|user set the span policy. --max-concurrency requests decode together,
    --max-queue more wait, then 429. --cache-bytes bounds the system-prompt cache (0: off);
    --cache-salt separates tenants. The served model id is --served-model-name (default: MODEL).
    --dtype auto (bf16 where this machine is fast at it, else float32) | float32 | bfloat16.
    --api-key KEY [KEY ...] (and CALYREX_API_KEY, comma-separated): every route but /health wants
    "Authorization: Bearer KEY". --max-body-bytes, --max-messages, --max-message-chars and
    --max-json-depth bound a request before any work is done on it (a 4xx naming the flag).
    """
    import uvicorn

    from ..adapters.loading import load_model
    from .app import create_app
    from .auth import ENV, api_keys, bind_warning
    from .engine import Engine

    cfg = ServeConfig(
        model_name=served_model_name or model,
        max_concurrency=max_concurrency,
        max_queue=max_queue,
        cache_bytes=cache_bytes,
        cache_salt=cache_salt,
        system_prompt=Path(system_prompt).read_text() if system_prompt else None,
        client_system=client_system,
        developer_role=developer_role,
        later_system=later_system,
        shutdown_grace_s=shutdown_grace,
        api_keys=api_keys(api_key, os.environ.get(ENV)),
        max_body_bytes=max_body_bytes,
        max_messages=max_messages,
        max_message_chars=max_message_chars,
        max_json_depth=max_json_depth,
    )
    warning = bind_warning(host, cfg.api_keys)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    hf_model, tok = load_model(model, adapter, dtype, device)
    engine = Engine(hf_model, tok, cfg).start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(engine),
            host=host,
            port=port,
            timeout_graceful_shutdown=int(shutdown_grace) + 5,
        )
    )
    exit_uvicorn = server.handle_exit

    def handle_exit(sig: int, frame: Any) -> None:
        # let running requests finish (or end them with a final error event), then stop
        threading.Thread(target=engine.shutdown, daemon=True).start()
        exit_uvicorn(sig, frame)

    server.handle_exit = handle_exit  # type: ignore[method-assign]
    auth = f", {len(cfg.api_keys)} API key(s)" if cfg.api_keys else ""
    print(f"calyrex serve: {cfg.model_name} on http://{host}:{port}/v1{auth}", flush=True)
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises the signal it shut down on
        pass
    return 0
