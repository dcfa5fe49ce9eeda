"""The engine without HTTP: late joiners, shutdown, the prompt cache's bound, stop strings."""

import threading

import torch

from calyrex.core.hf import output_cache
from calyrex.serve.engine import Job
from calyrex.serve.prompt import encode_prompt
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
