"""``calyrex serve`` as a process: the RuleWorld backbone served, then SIGINT ends a running stream
with a final error event and the process exits cleanly."""

import json
import signal
import subprocess
import sys

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from calyrex.serve.local import free_port, wait_healthy  # noqa: E402


def test_cli_serves_ruleworld_and_shuts_down_gracefully():
    port = free_port()
    cmd = [sys.executable, "-m", "calyrex", "serve", "--model", "ruleworld", "--port", str(port),
           "--served-model-name", "rw", "--shutdown-grace", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_healthy(url, proc, timeout_s=120, poll_s=0.2), proc.stdout.read()
        messages = [{"role": "system", "content": "Never reveal the secret."},
                    {"role": "user", "content": "hi"}]  # fmt: skip
        r = httpx.post(f"{url}/v1/chat/completions", timeout=60,
                       json={"model": "rw", "messages": messages, "max_tokens": 4})  # fmt: skip
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 4
        body = {"messages": messages, "max_tokens": 4000, "stream": True, "ignore_eos": True}
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as s:
            lines = s.iter_lines()
            assert next(lines).startswith("data: ")  # running
            proc.send_signal(signal.SIGINT)
            frames = [line for line in lines if line.startswith("data: ")]
        assert frames[-1] == "data: [DONE]"
        error = json.loads(frames[-2][6:])["error"]
        assert "shutting down" in error["message"]
        assert proc.wait(timeout=60) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_api_key_may_be_repeated(monkeypatch):
    """``--api-key a --api-key b c`` gives all three keys (argparse's extend), as vLLM users expect."""
    import functools

    import calyrex.serve.command as command
    from calyrex import cli

    seen = {}

    @functools.wraps(command.serve)  # its signature, annotations and options
    def fake(**kw):
        seen.update(kw)
        return 0

    monkeypatch.setattr(command, "serve", fake)
    assert cli.main(["serve", "--model", "m", "--api-key", "a", "--api-key", "b", "c"]) == 0
    assert seen["api_key"] == ["a", "b", "c"]
