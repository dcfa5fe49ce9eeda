"""Rendering and tokenisation of requests on threads of their own, never under the engine's lock.

A request is rendered and tokenised (:func:`~calyrex.serve.prompt.encode_prompt`, linear in its
length) on one of ``encode_workers`` threads while the engine keeps decoding, so a long request
delays its own answer, not everyone's. Each thread has its own copy of the tokenizer: a HF fast
tokenizer sets per-call state (``split_special_tokens``, padding, truncation) on the one Rust
object it wraps, and two threads sharing it could tokenise a user's ``<|im_start|>`` as the
special token.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .errors import APIError
from .prompt import Prompt, encode_prompt


class Encoder:
    """``await encoder(messages)`` → the :class:`Prompt`, or a 400 the template asked for."""

    def __init__(self, tokenizer: Any, workers: int) -> None:
        self.tokenizer = tokenizer
        self._local = threading.local()
        self._copying = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="calyrex-encode")

    async def __call__(self, messages: list[dict[str, str]]) -> Prompt:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._encode, messages)

    def _encode(self, messages: list[dict[str, str]]) -> Prompt:
        tokenizer = getattr(self._local, "tokenizer", None)
        if tokenizer is None:  # this thread's own copy, made once
            with self._copying:
                tokenizer = self._local.tokenizer = copy.deepcopy(self.tokenizer)
        try:
            return encode_prompt(tokenizer, messages)
        except ValueError as err:  # ChatTemplateError, or transformers refusing the conversation
            raise APIError(400, f"the chat template rejected the conversation: {err}") from err

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
