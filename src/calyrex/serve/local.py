"""A server on a free loopback port in a background thread (tests, the benchmark, notebooks)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .engine import Engine


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, poll_s: float = 0.5) -> bool:
    """Poll ``url``/health until it answers 200 (True), or until the server process ``proc``
    exits or ``timeout_s`` passes (False): for servers started as separate processes."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(poll_s)
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextmanager
def local_server(engine: Engine, host: str = "127.0.0.1", timeout_s: float = 60.0) -> Iterator[str]:
    """Serve ``engine`` on ``host``; yields the base URL (``http://host:port/v1``).

    On exit the server stops and the engine shuts down (it cannot be started again).
    """
    import uvicorn

    from .app import create_app

    port = free_port(host)
    config = uvicorn.Config(create_app(engine), host=host, port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="calyrex-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server on {host}:{port} did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout_s)
