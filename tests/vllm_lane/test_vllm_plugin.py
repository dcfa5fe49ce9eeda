"""The vLLM plugin against HF calyrex: greedy tokens identical (and each one's log-probability
within 1e-4) over chunk sizes × prefix caching
× cache hits ending before / inside / after the system span, no-system conversations and mixed
batches; zero adapter ≡ stock vLLM; cache hits by vLLM's own formula.

Runs in the vLLM lane (``scripts/test.sh --vllm``, ``.venv-vllm``); skipped where vLLM is absent.
Each engine runs in its own process (``engine_run.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402
from build import build, tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from calyrex import encode_chat, load_adapter  # noqa: E402
from calyrex.span.markers import find_span, span_markers  # noqa: E402

HERE = Path(__file__).parent
BLOCK, NEW = 32, 10
# vLLM's log-probability of each greedy token against HF calyrex's, fp32: the tiny random models'
# attention is near uniform, so a wrong softmax scale in the CAL layer can leave every greedy
# token unchanged and only move the log-probabilities
LOGPROB_TOL = 1e-4  # measured 5e-7 apart on qwen2; the padded-scale break: 1.7e-3
RULES = "Never reveal the secret word. The secret is banana. Always answer in capital letters. "
SORT = "Please sort these numbers: 3 1 2. The quick brown fox jumps over the lazy dog. "
DEFAULT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."  # Qwen2.5's
CONVS = {
    "a": [
        {"role": "system", "content": RULES * 2},
        {"role": "user", "content": SORT * 2 + "Hello!"},
    ],
    # same system prompt, other last words: the hit ends after the span
    "after": [
        {"role": "system", "content": RULES * 2},
        {"role": "user", "content": SORT * 2 + "How are you today?"},
    ],
    # same system prompt, another user turn at once: the hit's last block ends inside the span
    "inside": [{"role": "system", "content": RULES * 2}, {"role": "user", "content": "Hello!"}],
    # llama: another system prompt of the same length after the long dated header: the hit ends
    # before the span
    "before": [
        {"role": "system", "content": (RULES * 2).replace("Never reveal the", "Never reveal a", 1)},
        {"role": "user", "content": SORT * 2 + "Hello!"},
    ],
    "none": [{"role": "user", "content": "Hello! How are you today? " + SORT}],
    # Qwen2.5 renders DEFAULT when there is no system message (not span); a system prompt that
    # starts with it shares its first block's tokens but not their span membership
    "default+": [
        {"role": "system", "content": DEFAULT + " " + RULES},
        {"role": "user", "content": "Hello! How are you today? " + SORT},
    ],
    "short": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello! How are you today?"},
    ],
}
PLANS = {  # phases of prompts, run in order in one engine
    "qwen2": [
        ["a"],
        ["after"],
        ["inside"],
        ["none"],
        ["default+"],
        ["none", "short", "a", "inside"],
    ],
    "llama": [["a"], ["before"], ["after"], ["none", "short", "before"]],
    "qwen3": [["a"], ["after"], ["inside"], ["none", "short", "a"]],
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm")
    return {
        "qwen2": build("qwen2", root / "qwen2"),
        "llama": build("llama", root / "llama"),
        "qwen3": build("qwen3", root / "qwen3"),
        "zero": build("qwen2", root / "zero", zero=True),
    }


def encoded(family, name):
    tok = tokenizer(family)
    return encode_chat(tok, [CONVS[name]], add_generation_prompt=True, return_tensors="pt")


def greedy(model, enc, n=NEW, eos=None):
    """HF greedy decoding without a cache (the reference), stopping after ``eos``."""
    return greedy_scored(model, enc, n, eos)[0]


def greedy_scored(model, enc, n=NEW, eos=None):
    """:func:`greedy`'s tokens and each one's log-probability (log-softmax of the logits)."""
    ids = enc["input_ids"]
    out, scores = [], []
    with torch.no_grad():
        for _ in range(n):
            kwargs = {}
            if "system_mask" in enc:  # generated tokens are never span
                mask = enc["system_mask"]
                kwargs["system_mask"] = torch.nn.functional.pad(
                    mask, (0, ids.shape[1] - mask.shape[1])
                )
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs).logits
            nxt = int(logits[0, -1].argmax())
            out.append(nxt)
            scores.append(float(torch.log_softmax(logits[0, -1], -1)[nxt]))
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
            if nxt == eos:
                break
    return out, scores


def run_engine(spec, tmp_path, name, fails=False):
    spec_file, out_file = tmp_path / f"{name}.json", tmp_path / f"{name}.out.json"
    spec_file.write_text(json.dumps(spec))
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": path}  # the caller's too
    proc = subprocess.run(
        [sys.executable, str(HERE / "engine_run.py"), str(spec_file), str(out_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if fails:
        assert proc.returncode != 0
        return proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(out_file.read_text())


def hf_model(paths, adapter=True):
    base = AutoModelForCausalLM.from_pretrained(paths["base"], dtype=torch.float32).eval()
    return load_adapter(base, str(paths["adapter"])).eval() if adapter else base


def common(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# the default lane: chunked prefill with prefix caching (chunk boundaries and cache hits inside
# the span, the hardest case) and neither; the two mixed cases are each a part of the first and
# cost an engine start each (about 2 min on 2 CPUs), so they run with -m slow
SLOW = pytest.mark.slow
MATRIX = [("qwen2", 32, True), ("qwen2", 256, False)]
MATRIX += [
    pytest.param("qwen2", 32, False, marks=SLOW),
    pytest.param("qwen2", 256, True, marks=SLOW),
]
MATRIX += [("llama", 32, True), ("qwen3", 32, True)]  # their layers: the same code as Qwen2's


@pytest.mark.parametrize("family,chunk,caching", MATRIX)
def test_greedy_tokens_equal_hf_calyrex(models, tmp_path, family, chunk, caching):
    paths, plan = models[family], PLANS[family]
    tok = tokenizer(family)
    markers = span_markers(tok)
    prompts = {n: encoded(family, n)["input_ids"][0].tolist() for p in plan for n in p}
    spec = {
        "model": str(paths["vllm"]),
        "tokenizer_mode": "calyrex",
        "max_num_batched_tokens": chunk,
        "prefix_caching": caching,
        "max_tokens": NEW,
        "phases": [[prompts[n] for n in phase] for phase in plan],
    }
    got = run_engine(spec, tmp_path, f"{family}-{chunk}-{caching}")["phases"]
    model, base = hf_model(paths), hf_model(paths, adapter=False)
    seen: list[tuple[list[int], tuple | None]] = []
    differs = 0
    for phase, outs in zip(plan, got, strict=True):
        for name, out in zip(phase, outs, strict=True):
            enc = encoded(family, name)
            want, scores = greedy_scored(model, enc, eos=tok.eos_token_id)
            assert out["tokens"][: len(want)] == want, (family, name, phase)
            gap = max(abs(a - b) for a, b in zip(out["logprobs"], scores, strict=False))
            assert gap < LOGPROB_TOL, (family, name, phase, gap)  # not the tokens alone
            plain = greedy(base, {"input_ids": enc["input_ids"]}, eos=tok.eos_token_id)
            span = find_span(markers, prompts[name])  # blocks are shared only under one span
            hit = max((common(prompts[name], p) for p, sp in seen if sp == span), default=0)
            if span is None:
                assert want == plain, f"{name}: no system span must give the base model's tokens"
            differs += want != plain
            expected = min(hit // BLOCK, (len(prompts[name]) - 1) // BLOCK) * BLOCK
            if not caching:
                assert out["num_cached_tokens"] == 0
            elif len(phase) == 1:
                assert out["num_cached_tokens"] == expected, (name, hit, len(prompts[name]))
            else:  # a mixed batch may also hit blocks of its own requests
                assert out["num_cached_tokens"] >= expected
        seen += [(prompts[n], find_span(markers, prompts[n])) for n in phase]
    assert differs >= 3, "the adapter must change the output, or the test proves nothing"


def test_the_carried_span_is_the_one_served(models, tmp_path):
    """Each request is served the span it carries, never one re-found from its ids: prompt "a"
    carrying half its system span (the calyrex renderer's channel) ≡ HF calyrex with that half
    as ``system_mask``, not with the span of its ids; the same ids without a carried span get
    the ids' span and no cache hit on the half-span blocks (the salt follows the carried span),
    while a repeat of the half-span request hits them. Chats through ``LLM.chat`` carry
    ``encode_chat``'s span out of the renderer and ≡ HF calyrex (both with the tokenizer vLLM
    loads from the export, whose pre-tokeniser splits digits unlike the one it was built from)."""
    paths, tok = models["qwen2"], tokenizer("qwen2")
    ids = encoded("qwen2", "a")["input_ids"][0].tolist()
    start, end = find_span(span_markers(tok), ids)
    half = [start, start + (end - start) // 2]
    chats = ["a", "short", "none"]
    spec = {"model": str(paths["vllm"]), "tokenizer_mode": "calyrex",
            "max_num_batched_tokens": 32, "prefix_caching": True, "max_tokens": NEW,
            "phases": [[{"ids": ids, "span": half}], [ids], [{"ids": ids, "span": half}],
                       {"chat": [CONVS[n] for n in chats]}]}  # fmt: skip
    got = run_engine(spec, tmp_path, "carried")["phases"]
    model = hf_model(paths)

    def with_span(a, b):
        mask = torch.zeros(1, len(ids), dtype=torch.long)
        mask[0, a:b] = 1
        return greedy(model, {"input_ids": torch.tensor([ids]), "system_mask": mask})

    want_half, want_ids = with_span(*half), with_span(start, end)
    assert want_half != want_ids, "the half span must change the output, or this proves nothing"
    (first,), (plain,), (again,), chatted = got
    assert first["tokens"] == want_half and again["tokens"] == want_half
    assert plain["tokens"] == want_ids
    assert first["num_cached_tokens"] == 0 and plain["num_cached_tokens"] == 0
    assert again["num_cached_tokens"] == (len(ids) - 1) // BLOCK * BLOCK
    served = AutoTokenizer.from_pretrained(paths["vllm"])
    for name, out in zip(chats, chatted, strict=True):
        enc = encode_chat(served, [CONVS[name]], add_generation_prompt=True, return_tensors="pt")
        mask = enc["system_mask"][0].tolist()
        marked = [i for i, m in enumerate(mask) if m]
        assert out["carried"] == ([marked[0], marked[-1] + 1] if marked else [0, 0]), name
        want = greedy(model, enc, eos=tok.eos_token_id)
        assert out["tokens"][: len(want)] == want, name


def test_cache_hit_scenarios_are_what_they_claim():
    """The premises of the plans: where each second request's cache hit ends vs its span."""
    for family, name, where in (
        ("qwen2", "after", "after"),
        ("qwen2", "inside", "inside"),
        ("llama", "before", "before"),
        ("llama", "after", "after"),
        ("llama", "inside", "inside"),
        ("qwen3", "after", "after"),
        ("qwen3", "inside", "inside"),
    ):
        tok = tokenizer(family)
        ids = encoded(family, name)["input_ids"][0].tolist()
        hit = common(ids, encoded(family, "a")["input_ids"][0].tolist()) // BLOCK * BLOCK
        start, end = find_span(span_markers(tok), ids)
        assert (start, end) == find_span(
            span_markers(tok), encoded(family, "a")["input_ids"][0].tolist()
        )
        actual = "before" if hit <= start else "inside" if hit < end else "after"
        assert actual == where, (family, name, hit, start, end)


def test_zero_adapter_equals_stock_vllm(models, tmp_path):
    paths = models["zero"]
    prompts = [encoded("qwen2", n)["input_ids"][0].tolist() for n in ("a", "none", "short")]
    spec = {
        "max_num_batched_tokens": 32,
        "prefix_caching": True,
        "max_tokens": NEW,
        "phases": [prompts],
    }
    cal = run_engine(
        {**spec, "model": str(paths["vllm"]), "tokenizer_mode": "calyrex"}, tmp_path, "zero"
    )
    stock = run_engine({**spec, "model": str(paths["base"])}, tmp_path, "stock")
    assert cal["phases"] == stock["phases"]


def test_a_compiled_forward_is_refused(models, tmp_path):
    """A compiled / graph-captured forward would keep the capture batch's span: refused."""
    spec = {"model": str(models["qwen2"]["vllm"]), "tokenizer_mode": "calyrex",
            "max_num_batched_tokens": 32, "prefix_caching": True, "max_tokens": 1,
            "phases": [], "enforce_eager": False}  # fmt: skip
    assert "needs --enforce-eager" in run_engine(spec, tmp_path, "compiled", fails=True)


def test_default_system_prefix_shares_tokens_but_not_span():
    """The premise of the "default+" phase: its first block's tokens are those of a request
    without a span (so only the span salt keeps it from hitting that block)."""
    tok = tokenizer("qwen2")
    none, plus = (encoded("qwen2", n)["input_ids"][0].tolist() for n in ("none", "default+"))
    assert common(none, plus) >= BLOCK
    assert find_span(span_markers(tok), none) is None and find_span(span_markers(tok), plus)


def test_an_fp8_kv_cache_is_refused_by_name():
    """The key-bias channel (NEG = -30000) saturates an fp8 KV cache: the CAL layer refuses one
    before building its attention, naming the flag to drop."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    from calyrex.core.config import CalyrexConfig
    from calyrex.vllm.block import KeyBiasCAL

    host = AutoConfig.for_model("qwen2", hidden_size=64, num_attention_heads=4,
                                num_key_value_heads=2, num_hidden_layers=4)  # fmt: skip
    cfg = CalyrexConfig(layers=[3]).resolve(host).to_dict()
    for dtype in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        with pytest.raises(ValueError, match="need a 16- or 32-bit KV cache.*--kv-cache-dtype fp8"):
            KeyBiasCAL(64, cfg, SimpleNamespace(cache_dtype=dtype), "model.layers.3.cal", None)
