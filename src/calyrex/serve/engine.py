"""The engine: one thread that owns the model, admits requests and decodes them together.

Each iteration of its loop (Orca-style iteration-level scheduling):

1. admit waiting requests while rows are free (``max_concurrency``): prefill each on its own —
   the system turn from the prompt cache when it is there — sample its first token, and append
   its cache to the decode batch (:mod:`calyrex.serve.batch`);
2. drop rows and waiting requests whose client went away (the server sets ``Job.cancelled`` as
   soon as the connection closes, so a disconnect frees its row at the next step);
3. one batched decode step for every running row; each samples with its own parameters, and
   rows that finished (end of turn, stop string, ``max_tokens``) leave the batch.

Requests are handed in by :meth:`Engine.submit` from any thread, already rendered and tokenised
(:mod:`calyrex.serve.encoder`): this thread and its lock do model work only. What a request
produces goes back through its ``emit`` callback (the server wraps it onto its event loop).
"""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..adapters.methods import accept_system_mask, is_calyrex
from ..core import hf
from .batch import DecodeBatch
from .config import ServeConfig
from .errors import APIError
from .metrics import Metrics
from .prompt import Prompt, system_turn
from .prompt_cache import PromptCache, prefix_key
from .request import SamplingParams
from .sampling import Sampler, TextStream


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int = 0
    cached_tokens: int = 0


@dataclass
class Event:
    """What a request produces: text, then one ``done`` (or one ``error``)."""

    kind: str  # "text" | "done" | "error"
    text: str = ""
    finish_reason: str | None = None  # stop | length | cancelled (done)
    usage: Usage | None = None
    status: int = 500  # error


@dataclass
class Job:
    """One request as the engine sees it."""

    prompt: Prompt
    max_tokens: int
    emit: Callable[[Event], None]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: list[str] = field(default_factory=list)
    salt: str = ""  # the request's cache_salt (added to the server's)
    ignore_eos: bool = False  # run to max_tokens
    cancelled: threading.Event = field(default_factory=threading.Event)
    submitted: float = field(default_factory=time.perf_counter)
    closed: bool = False  # its done/error event was sent


@dataclass
class _Row:
    job: Job
    sampler: Sampler
    text: TextStream
    usage: Usage
    next_token: int = -1


def adapter_digest(model: Any) -> str:
    """sha256 of a calyrex model's adapter tensors (``base`` for any other model): part of every
    cache key."""
    if not is_calyrex(model):
        return "base"
    h = hashlib.sha256()
    for name, t in sorted(model.adapter_state_dict().items()):
        h.update(name.encode() + t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Engine:
    """Owns ``model`` on one thread; :meth:`submit` is safe from any thread."""

    def __init__(
        self, model: Any, tokenizer: Any, cfg: ServeConfig, metrics: Metrics | None = None
    ) -> None:
        # every model takes system_mask (a calyrex model reads it; others ignore it)
        self.model, self.tokenizer, self.cfg = accept_system_mask(model).eval(), tokenizer, cfg
        # HF fast tokenizers mutate their state on every call: the engine thread decodes with its
        # own copy (encoding threads have theirs, calyrex.serve.encoder)
        self._detokenizer = copy.deepcopy(tokenizer)
        self.metrics = metrics or Metrics()
        self.cache = PromptCache(cfg.cache_bytes)
        self.adapter = adapter_digest(model)
        self.dtype = hf.weights_dtype(model)
        self.device = next(model.parameters()).device
        self.eos = hf.eos_ids(model, tokenizer)
        self.window = int(getattr(model.config, "max_position_embeddings", 1 << 30))
        self._batch = DecodeBatch()
        self._rows: list[_Row] = []
        self._waiting: deque[Job] = deque()
        self._inflight = 0
        self._cond = threading.Condition()
        self._stopping = self._abort = False
        self._thread = threading.Thread(target=self._run, name="calyrex-engine", daemon=True)
        for name, fn in {
            "calyrex_requests_running": lambda: len(self._rows),
            "calyrex_queue_depth": lambda: len(self._waiting),
            "calyrex_prompt_cache_bytes": lambda: self.cache.nbytes,
            "calyrex_prompt_cache_entries": lambda: len(self.cache),
        }.items():
            self.metrics.gauges[name] = fn

    # -- life cycle ----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    @property
    def stopping(self) -> bool:
        return self._stopping

    def start(self) -> Engine:
        if self.cfg.system_prompt is not None and self.cache.enabled:
            self.warm(self.cfg.system_prompt)
        self._thread.start()
        return self

    @torch.no_grad()
    def warm(self, system: str) -> None:
        """Prefill a pinned system prompt into the cache (never evicted)."""
        turn = system_turn(self.tokenizer, system)
        ids, span = self._tensors(turn)
        out = self._forward(ids, span, None)
        self.cache.put(self._key(turn, ""), hf.output_cache(out), turn.prefix_len, pinned=True)
        self.metrics.add("calyrex_prefill_tokens_forwarded_total", turn.prefix_len)

    def shutdown(self, grace_s: float | None = None) -> None:
        """Refuse new requests, let running ones finish for ``grace_s``, then cancel the rest."""
        grace = self.cfg.shutdown_grace_s if grace_s is None else grace_s
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._inflight == 0, timeout=grace)
            self._abort = True
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def submit(self, job: Job) -> None:
        """Queue ``job``; a 503 while shutting down, a 429 (Retry-After) when the queue is full."""
        with self._cond:
            if self._stopping:
                raise APIError(503, "the server is shutting down")
            if self._inflight >= self.cfg.max_concurrency + self.cfg.max_queue:
                raise APIError(
                    429,
                    f"the server is busy: {self.cfg.max_concurrency} requests running and "
                    f"{self.cfg.max_queue} queued; retry later",
                    headers={"Retry-After": "1"},
                )
            self._inflight += 1
            self._waiting.append(job)
            self._cond.notify_all()

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._rows or self._stopping)
                if self._abort or (self._stopping and not self._waiting and not self._rows):
                    break
                gone = [j for j in self._waiting if j.cancelled.is_set()]
                if gone:
                    self._waiting = deque(j for j in self._waiting if not j.cancelled.is_set())
                free = self.cfg.max_concurrency - len(self._rows)
                admitted = [self._waiting.popleft() for _ in range(min(free, len(self._waiting)))]
            for job in gone:  # the client left while it waited: its queue place is free
                self._finish(job, Usage(len(job.prompt.input_ids)), "cancelled")
            for job in admitted:
                try:
                    self._admit(job)
                except Exception as err:  # noqa: BLE001 — one request fails, the server lives
                    self._fail(job, f"generation failed: {type(err).__name__}: {err}")
            self._keep([r for r in self._rows if not r.job.cancelled.is_set()], "cancelled")
            if self._rows:
                try:
                    self._step()
                except Exception as err:  # noqa: BLE001
                    for row in self._rows:
                        self._fail(row.job, f"generation failed: {type(err).__name__}: {err}")
                    self._rows, self._batch = [], DecodeBatch()
            # hand the GIL to the HTTP thread between steps (small models are GIL-bound)
            time.sleep(0)
        with self._cond:
            left = [r.job for r in self._rows] + list(self._waiting)
            self._rows, self._waiting = [], deque()
        for job in left:
            self._fail(job, "the server is shutting down; the request was cancelled", 503)

    @torch.no_grad()
    def _admit(self, job: Job) -> None:
        self.metrics.observe("calyrex_queue_wait_seconds", time.perf_counter() - job.submitted)
        if job.cancelled.is_set():
            self._finish(job, Usage(len(job.prompt.input_ids)), "cancelled")
            return
        cache, logits, cached = self._prefill(job)
        usage = Usage(len(job.prompt.input_ids), cached_tokens=cached)
        row = _Row(job, Sampler(job.sampling), TextStream(self._detokenizer, job.stop), usage)
        self.metrics.observe(
            "calyrex_time_to_first_token_seconds", time.perf_counter() - job.submitted
        )
        if not self._advance(row, row.sampler(logits[0])):
            self._batch.add(cache, len(job.prompt.input_ids))
            self._rows.append(row)

    def _step(self) -> None:
        tokens = torch.tensor([r.next_token for r in self._rows], device=self.device)
        logits = self._batch.step(self.model, tokens)  # (B, V)
        self.metrics.add("calyrex_decode_steps_total")
        self.metrics.add("calyrex_decode_rows_total", len(self._rows))
        keep = [r for i, r in enumerate(self._rows) if not self._advance(r, r.sampler(logits[i]))]
        self._keep(keep, None)

    def _keep(self, rows: list[_Row], reason: str | None) -> None:
        if len(rows) == len(self._rows):
            return
        kept = {id(r) for r in rows}
        for r in self._rows:
            if id(r) not in kept and reason is not None:
                self._finish(r.job, r.usage, reason)
        self._batch.keep([i for i, r in enumerate(self._rows) if id(r) in kept])
        self._rows = rows

    def _advance(self, row: _Row, token: int) -> bool:
        """Take ``token`` for ``row``; emit its text; True when the request is finished."""
        row.next_token = token
        row.usage.completion_tokens += 1
        self.metrics.add("calyrex_completion_tokens_total")
        reason = None
        if token in self.eos and not row.job.ignore_eos:
            reason = "stop"
        else:
            delta = row.text.push(token)
            if delta:
                row.job.emit(Event("text", delta))
            if row.text.stopped:
                reason = "stop"
        if reason is None and row.usage.completion_tokens >= row.job.max_tokens:
            reason = "length"
        if reason is None:
            return False
        if not row.text.stopped:
            rest = row.text.flush()
            if rest:
                row.job.emit(Event("text", rest))
        self._finish(row.job, row.usage, reason)
        return True

    # -- prefill -------------------------------------------------------------------------------
    def _prefill(self, job: Job) -> tuple[Any, torch.Tensor, int]:
        """(cache, next-token logits (1, V), cached tokens): the system turn from the cache if hit."""
        ids, span = self._tensors(job.prompt)
        k = job.prompt.prefix_len if self.cache.enabled else 0
        cache, cached = None, 0
        if k:
            key = self._key(job.prompt, job.salt)
            cache = self.cache.get(key)
            if cache is not None:
                cached = k
                self.metrics.add("calyrex_prompt_cache_hits_total")
                self.metrics.add("calyrex_cached_tokens_total", k)
            else:
                self.metrics.add("calyrex_prompt_cache_misses_total")
                cache = hf.output_cache(self._forward(ids[:, :k], span[:, :k], None))
                self.cache.put(key, cache, k)
        out = self._forward(ids[:, k:], span[:, k:], cache)
        return hf.output_cache(out), out.logits[:, -1].float(), cached

    def _forward(self, ids: torch.Tensor, span: torch.Tensor, cache: Any) -> Any:
        """One prefill call of (1, T) tokens after ``cache``; counts every token it runs."""
        self.metrics.add("calyrex_prefill_tokens_forwarded_total", ids.shape[1])
        kwargs: dict[str, Any] = {
            "input_ids": ids,
            "system_mask": span,
            "use_cache": True,
            "logits_to_keep": 1,
        }
        if cache is not None:
            kwargs.update(hf.cache_kwargs(self.model, cache))
        return self.model(**kwargs)

    def _tensors(self, prompt: Prompt) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.tensor([prompt.input_ids], device=self.device)  # (1, T)
        return ids, torch.tensor([prompt.system_mask], device=self.device).bool()

    def _key(self, prompt: Prompt, salt: str) -> str:
        k = prompt.prefix_len
        salt = f"{self.cfg.cache_salt}\0{salt}"
        return prefix_key(
            self.adapter, self.dtype, salt, prompt.input_ids[:k], prompt.system_mask[:k]
        )

    # -- ends ----------------------------------------------------------------------------------
    def _finish(self, job: Job, usage: Usage, reason: str) -> None:
        if job.closed:
            return
        self.metrics.add("calyrex_requests_total", 1, reason)
        self.metrics.add("calyrex_prompt_tokens_total", usage.prompt_tokens)
        job.emit(Event("done", finish_reason=reason, usage=usage))
        self._release(job)

    def _fail(self, job: Job, message: str, status: int = 500) -> None:
        if job.closed:
            return
        self.metrics.add("calyrex_requests_total", 1, "error")
        job.emit(Event("error", text=message, status=status))
        self._release(job)

    def _release(self, job: Job) -> None:
        job.closed = True
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()
