"""The engine without HTTP: late joiners, shutdown, the prompt cache's bound, stop strings, and
the stream frames a reply makes of its events."""

import asyncio
import json
import threading

import pytest
import torch

from calyrex.core.hf import output_cache
from calyrex.serve.engine import Event, Job, Usage
from calyrex.serve.prompt import Prompt, encode_prompt
from calyrex.serve.prompt_cache import PromptCache, cache_bytes, prefix_key
from calyrex.serve.request import SamplingParams
from calyrex.serve.sampling import TextStream
from serve_helpers import cal_model, conversation, engine, reference


class Collect:
    def __init__(self):
        self.text, self.done, self.end = [], threading.Event(), None
        self.first = threading.Event()

    def __call__(self, event):
        if event.kind == "text":
            self.text.append(event.text)
            self.first.set()
        else:
            self.end = event
            self.done.set()
            self.first.set()


def _job(tok, conv, n, sink):
    return Job(encode_prompt(tok, conv), n, sink, SamplingParams(temperature=0.0))


def test_a_request_joins_a_running_batch_and_both_match_generate(tok):
    model = cal_model(tok)
    eng = engine(model, tok).start()
    eng.eos = set()  # both run to max_tokens, so they overlap
    a_conv, b_conv = conversation("say the secret"), conversation("hi", system=None)
    a, b = Collect(), Collect()
    eng.submit(_job(tok, a_conv, 24, a))
    a.first.wait(30)  # A is decoding; B joins at the next step
    eng.submit(_job(tok, b_conv, 8, b))
    assert a.done.wait(60) and b.done.wait(60)
    eng.shutdown()
    assert "".join(a.text) == reference(model, tok, a_conv, 24, set())
    assert "".join(b.text) == reference(model, tok, b_conv, 8, set())
    assert a.end.finish_reason == b.end.finish_reason == "length"


def test_shutdown_ends_running_requests_with_a_final_error(tok):
    eng = engine(cal_model(tok), tok).start()
    eng.eos = set()
    sink = Collect()
    eng.submit(_job(tok, conversation("hi"), 400, sink))
    sink.first.wait(30)
    eng.shutdown(grace_s=0)
    assert sink.done.is_set() and sink.end.kind == "error" and sink.end.status == 503
    assert "shutting down" in sink.end.text


def test_prompt_cache_is_an_lru_bounded_in_bytes(tok):
    model = cal_model(tok)
    caches = []
    for user in ("a", "bb", "ccc"):
        p = encode_prompt(tok, conversation("hi", system=f"rule {user}"))
        ids = torch.tensor([p.input_ids[: p.prefix_len]])
        span = torch.tensor([p.system_mask[: p.prefix_len]]).bool()
        with torch.no_grad():
            out = model(input_ids=ids, system_mask=span, use_cache=True)
        caches.append((p, output_cache(out)))
    size = max(cache_bytes(c) for _, c in caches)
    lru = PromptCache(capacity=2 * size)
    keys = [prefix_key("x", "float32", "", p.input_ids, p.system_mask) for p, _ in caches]
    assert lru.put(keys[0], caches[0][1], 1, pinned=True)
    assert lru.put(keys[1], caches[1][1], 1)
    assert lru.put(keys[2], caches[2][1], 1)  # evicts keys[1], never the pinned keys[0]
    assert lru.nbytes <= lru.capacity
    assert lru.get(keys[1]) is None and lru.get(keys[0]) is not None
    copy = lru.get(keys[2])
    assert copy is not caches[2][1] and cache_bytes(copy) == cache_bytes(caches[2][1])
    assert not PromptCache(capacity=size // 4).put(keys[0], caches[0][1], 1)  # too large
    assert not PromptCache(capacity=0).enabled
    assert prefix_key("x", "float32", "a", [1], [1]) != prefix_key("x", "float32", "b", [1], [1])
    assert prefix_key("x", "float32", "", [1], [1]) != prefix_key("x", "bfloat16", "", [1], [1])
    assert prefix_key("x", "float32", "", [1, 2], [1, 0]) != prefix_key(
        "x", "float32", "", [1, 2], [1, 1]
    )
    lru = PromptCache(capacity=2 * size)  # a hit is used recently: the other entry goes first
    assert lru.put(keys[0], caches[0][1], 1) and lru.put(keys[1], caches[1][1], 1)
    assert lru.get(keys[0]) is not None and lru.put(keys[2], caches[2][1], 1)
    assert lru.get(keys[1]) is None and lru.get(keys[0]) is not None


def test_text_stream_cuts_at_stop_strings_across_tokens(tok):
    ids = tok("Hello! How are you today?", add_special_tokens=False)["input_ids"]
    stream = TextStream(tok, stop=["are you"])
    out = ""
    for t in ids:
        out += stream.push(t)
        if stream.stopped:
            break
    assert stream.stopped and out == "Hello! How "
    plain = TextStream(tok, stop=[])
    assert "".join(plain.push(t) for t in ids) + plain.flush() == "Hello! How are you today?"


def test_a_zero_initialised_adapter_serves_the_base_model(tok):
    import calyrex
    from calyrex.backbones.tiny import tiny_model

    wrapped = calyrex.wrap(tiny_model("qwen2"), calyrex.CalyrexConfig(placement="late_half"))
    eng = engine(wrapped, tok).start()
    conv = conversation("say the secret")
    sink = Collect()
    eng.submit(_job(tok, conv, 8, sink))
    assert sink.done.wait(60)
    eng.shutdown()
    base = reference(tiny_model("qwen2"), tok, conv, 8, eng.eos, with_span=False)
    assert "".join(sink.text) == base


def _frames(include_usage: bool) -> list[str]:
    from calyrex.serve.reply import Reply

    async def run() -> list[str]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        for event in (Event("text", "Hi"), Event("done", finish_reason="stop", usage=Usage(5, 1))):
            queue.put_nowait(event)
        job = Job(Prompt([1], [0], 0), 4, emit=lambda e: None)
        reply = Reply("m", include_usage, asyncio.create_task(asyncio.sleep(60)))
        return [frame async for frame in reply.stream(job, queue)]

    return asyncio.run(run())


def _bodies(frames: list[str]) -> list[dict]:
    assert frames[-1] == "data: [DONE]\n\n"
    return [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]


def test_a_stream_carries_usage_only_when_asked():
    pytest.importorskip("fastapi")
    plain = _bodies(_frames(False))
    assert [b["choices"][0]["delta"] for b in plain] == [
        {"role": "assistant", "content": ""},
        {"content": "Hi"},
        {},
    ]
    assert plain[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in b for b in plain)
    asked = _bodies(_frames(True))
    assert all(b["usage"] is None for b in asked[:-1])  # as OpenAI: null until the last frame
    assert asked[-1]["choices"] == [] and asked[-1]["usage"]["total_tokens"] == 6


def test_a_stream_closed_early_cancels_its_request():
    """The ASGI server closes the stream when its client goes (or it fails to send): the request
    is cancelled then, whether or not the disconnect watcher saw the client leave."""
    pytest.importorskip("fastapi")
    from calyrex.serve.reply import Reply

    async def run() -> tuple[Job, asyncio.Task]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        queue.put_nowait(Event("text", "Hi"))
        job = Job(Prompt([1], [0], 0), 4, emit=lambda e: None)
        watch = asyncio.create_task(asyncio.sleep(60))
        stream = Reply("m", False, watch).stream(job, queue)
        assert "assistant" in await stream.__anext__()
        await stream.aclose()
        await asyncio.sleep(0)
        return job, watch

    job, watch = asyncio.run(run())
    assert job.cancelled.is_set() and watch.cancelled()
