"""Pluggable judges: prompt text in, judgement text out.

* :class:`OpenAIJudge` — any OpenAI-compatible chat endpoint (a local vLLM server, the OpenAI
  API); ``check()`` refuses an unreachable endpoint with a clear :class:`JudgeUnavailable`.
* :class:`HFJudge` — a local Hugging Face chat model, greedy decoding.
* any callable ``str -> str`` (tests use a fake one).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

Judge = Callable[[str], str]


class JudgeUnavailable(RuntimeError):
    """The judge cannot be reached or keeps failing; the benchmark is skipped, not scored 0."""


class OpenAIJudge:
    """``POST {base_url}/chat/completions`` at temperature 0 (API key from ``OPENAI_API_KEY``)."""

    def __init__(self, base_url: str, model: str, timeout: float = 120.0, retries: int = 3) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.retries = retries

    def _headers(self) -> dict[str, str]:
        key = os.environ.get("OPENAI_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def check(self) -> None:
        """Fail fast, naming the endpoint, when it does not answer."""
        import requests

        try:
            requests.get(f"{self.base_url}/models", headers=self._headers(), timeout=10)
        except requests.RequestException as err:
            raise JudgeUnavailable(f"judge endpoint {self.base_url} is unreachable: {err}") from err

    def __call__(self, prompt: str) -> str:
        import requests

        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
        }
        error: Exception | None = None
        for attempt in range(self.retries):
            try:
                resp = requests.post(
                    f"{self.base_url}/chat/completions",
                    json=body,
                    headers=self._headers(),
                    timeout=self.timeout,
                )
                resp.raise_for_status()
                return resp.json()["choices"][0]["message"]["content"]
            except (requests.RequestException, KeyError, IndexError, json.JSONDecodeError) as err:
                error = err
                time.sleep(min(2**attempt, 10))
        raise JudgeUnavailable(
            f"judge endpoint {self.base_url} failed {self.retries} times: {error}"
        )


class HFJudge:
    """A local HF chat model as judge (greedy, ``max_new_tokens`` tokens)."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 512) -> None:
        from .generate import Generator

        self.generator = Generator(model, tokenizer, max_new_tokens=max_new_tokens, batch_size=1)

    @classmethod
    def from_pretrained(cls, name: str, max_new_tokens: int = 512) -> HFJudge:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        # not load_model: a judge may outgrow one device; device_map="auto" spreads it over all
        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name, dtype="auto", device_map="auto")
        return cls(model, tok, max_new_tokens)

    def __call__(self, prompt: str) -> str:
        (out,) = self.generator.chat([[{"role": "user", "content": prompt}]])
        if not isinstance(out, str):
            raise JudgeUnavailable(f"the judge model cannot read this prompt: {out.reason}")
        return out


def make_judge(spec: str | None, model: str | None = None) -> Judge | None:
    """``http(s)://host/v1`` (with ``model``) → :class:`OpenAIJudge`; ``hf:NAME`` → :class:`HFJudge`."""
    if not spec:
        return None
    if spec.startswith(("http://", "https://")):
        if not model:
            raise ValueError("an OpenAI-compatible judge needs --judge-model NAME")
        judge = OpenAIJudge(spec, model)
        judge.check()
        return judge
    if spec.startswith("hf:"):
        return HFJudge.from_pretrained(spec[3:])
    raise ValueError(
        f"unknown judge {spec!r}: use http(s)://HOST/v1 (with --judge-model) or hf:MODEL"
    )


def ask_yes_no(judge: Judge, prompt: str) -> bool:
    """A judge's yes/no verdict; anything else is an error, never a silent 'no'."""
    text = judge(prompt).strip().lower()
    match = re.match(r"\W*(yes|no)\b", text) or re.search(r"\b(yes|no)\W*$", text)
    if match:
        return match.group(1) == "yes"
    raise JudgeUnavailable(f"the judge answered neither yes nor no: {text[:200]!r}")
