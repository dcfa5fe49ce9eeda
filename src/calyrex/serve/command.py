"""``calyrex serve``: its own options are this function's signature, the server's policy and
limits the fields of :class:`~calyrex.serve.config.ServeConfig` (calyrex/cli/fields.py)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from ..backbones.precision import Dtype
from ..cli.fields import options_from
from .config import ServeConfig


@options_from(ServeConfig)
def serve(
    model: str,
    adapter: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    system_prompt: str | None = None,
    served_model_name: str | None = None,
    dtype: Dtype = "auto",
    device: str | None = None,
    shutdown_grace: float = 10.0,
    api_key: list[str] | None = None,
    **options: Any,
) -> int:
    """Serve MODEL (+ ADAPTER) behind an OpenAI-compatible API (/v1/chat/completions).

    The server's policy and limits are the ``ServeConfig`` flags below (each request is
    checked against them before any work: a 4xx naming the flag).

    Args:
        model: a hub id, a model directory or a registered name (smollm2, ruleworld)
        adapter: a trained adapter directory (any method)
        host: the address to bind; anything but loopback without --api-key prints a warning
        port: the port to bind
        system_prompt: a FILE whose text is the operator's pinned system prompt (client system
            messages are then rejected, or replaced with --client-system override)
        served_model_name: the model id clients name (GET /v1/models); default: MODEL
        dtype: auto (bf16 where this machine is fast at it, else float32) or a torch dtype
        device: cpu, cuda or cuda:N (default: CUDA when available)
        shutdown_grace: seconds in-flight requests get to finish on shutdown
        api_key: KEY [KEY ...] (and CALYREX_API_KEY, comma-separated): every route but /health
            wants "Authorization: Bearer KEY"
    """
    import uvicorn

    from ..adapters.loading import load_model
    from .app import create_app
    from .auth import ENV, api_keys, bind_warning
    from .engine import Engine

    cfg = ServeConfig(
        model_name=served_model_name or model,
        system_prompt=Path(system_prompt).read_text() if system_prompt else None,
        shutdown_grace_s=shutdown_grace,
        api_keys=api_keys(api_key, os.environ.get(ENV)),
        **options,
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
