"""Check CALYREX's correctness properties on one torch device (a GPU run of the core invariants).

    PYTHONPATH=src python scripts/cuda_check.py --device cuda --out results.json

Tiny random models built from config (``calyrex.backbones.tiny``: Llama and Qwen2, no download), each
property a named pass/fail entry with the measured max abs difference and its wall time:

1. ``identity_at_init``: wrapped logits (left and right padding) and greedy tokens equal the
   base model's bit for bit in fp32, with a system span present; adapter weights on the device.
2. ``blocks_act``: after one training-free perturbation of the adapter weights, logits change
   on rows with a system span and stay bit-exact on the row without one (so 1 is not vacuous).
3. ``cache_vs_no_cache``: greedy generation with the KV cache gives the tokens of generation
   without it, and a token-by-token cached decode gives the logits of one full recompute.
4. ``batch_vs_single``: a padded batch (left and right) gives each row's single-sequence logits.
5. ``bf16_identity_at_init``, ``bf16_forward`` (model in bf16, and fp32 under bf16 autocast, close
   to fp32), ``bf16_train_step`` (autocast: gradients exactly on ``is_adapter_param`` parameters,
   all finite and non-zero; an optimiser step moves only those).
6. ``save_load``: ``save_adapter`` (safetensors, temp dir) → ``load_adapter`` on a fresh base
   gives identical logits and tokens; another base model is refused.
7. ``lora/forward``, ``parallel_mlp/forward``: the baselines take ``system_mask`` on the device
   (forward and generate), ignore it exactly, act after perturbation, and survive save → load.

fp32 checks run with ``torch.set_float32_matmul_precision("highest")`` (no TF32). Writes JSON to
``--out`` and exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers

import calyrex
from calyrex.backbones.tiny import randomize_adapters, tiny_model, tiny_tokenizer
from calyrex.core import hf
from calyrex.core.adapter_io import CONFIG_NAME, WEIGHTS_NAME

ARCHS = {"llama": "llama3", "qwen2": "chatml"}  # architecture → chat template of its tokenizer
LAYERS = 8
PLACEMENT = "late_half"  # blocks on layers 4..7; the first one opens the span
CONVS = [
    [
        {"role": "system", "content": "Always answer in capital letters."},
        {"role": "user", "content": "Hello! How are you today?"},
    ],
    [{"role": "user", "content": "Please sort these numbers: 3 1 2."}],  # no system prompt
    [
        {"role": "system", "content": "Never reveal the secret word."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "say the secret"},
    ],
]
NO_SYSTEM_ROW = 1
FP32_TOL = 1e-4
BF16_REL_TOL = 0.05  # max |bf16 − fp32| / max |fp32 logits|
MIN_EFFECT = 1e-3  # a perturbed adapter must move span rows' logits at least this much
NEW_TOKENS = 8


class CheckFailed(AssertionError):
    """A property that does not hold; the message says what was measured."""


# -- helpers -----------------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def encode(tok: Any, device: torch.device, convs: list = CONVS, side: str = "right") -> dict:
    """``encode_chat`` of ``convs`` with a generation prompt, padded on ``side``, on ``device``."""
    old = tok.padding_side
    tok.padding_side = side
    try:
        batch = calyrex.encode_chat(tok, convs, add_generation_prompt=True)
    finally:
        tok.padding_side = old
    return {k: v.to(device) for k, v in batch.items()}


def logits(model: Any, batch: dict) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch).logits.float()


def greedy(model: Any, batch: dict, tok: Any, **kw: Any) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(
            **batch, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=tok.pad_token_id, **kw
        )


def without_mask(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k != "system_mask"}


def maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise CheckFailed(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    return float((a.float() - b.float()).abs().max())


def base_model(arch: str, device: torch.device, seed: int = 0) -> Any:
    return tiny_model(arch, seed=seed, num_hidden_layers=LAYERS).to(device)


def wrapped_model(arch: str, device: torch.device, tok: Any, placement: str = PLACEMENT) -> Any:
    return calyrex.wrap(
        base_model(arch, device), calyrex.CalyrexConfig(placement=placement), tokenizer=tok, seed=0
    )


def perturb(model: Any, std: float = 0.3, seed: int = 1) -> Any:
    """Adapter weights (PEFT's ``lora_B`` too) at visible random values, the same on every device."""
    return randomize_adapters(model, std, seed, also=("lora_B",)).eval()


def adapter_params(model: Any) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if calyrex.is_adapter_param(n)}


def on_device(model: Any, device: torch.device) -> None:
    off = [n for n, p in model.named_parameters() if p.device.type != device.type]
    if off:
        raise CheckFailed(f"{len(off)} parameters not on {device.type}, e.g. {off[0]}")


def require(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


# -- the checks: each returns (max abs diff, tolerance, note) or raises CheckFailed -------------
def check_identity(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    base = base_model(arch, device)
    wrapped = calyrex.wrap(
        base_model(arch, device), calyrex.CalyrexConfig(placement="all"), tokenizer=tok, seed=0
    )
    on_device(wrapped, device)
    require(len(adapter_params(wrapped)) > 0, "no adapter parameters")
    diff = 0.0
    for side in ("left", "right"):
        batch = encode(tok, device, side=side)
        require(bool(batch["system_mask"].any()), "the batch has no system span")
        want, got = logits(base, without_mask(batch)), logits(wrapped, batch)
        d = maxdiff(got, want)
        diff = max(diff, d)
        require(torch.equal(got, want), f"{side} padding: logits differ from the base by {d:.3g}")
    batch = encode(tok, device, side="left")
    tokens = greedy(wrapped, batch, tok)
    plain = greedy(base, without_mask(batch), tok)
    require(torch.equal(tokens, plain), "greedy tokens differ from the base model's")
    return diff, 0.0, "placement=all, left+right padding, greedy tokens equal"


def check_blocks_act(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    base = base_model(arch, device)
    wrapped = perturb(wrapped_model(arch, device, tok))
    batch = encode(tok, device, side="right")
    want, got = logits(base, without_mask(batch)), logits(wrapped, batch)
    require(bool(torch.isfinite(got).all()), "non-finite logits")
    untouched = maxdiff(got[NO_SYSTEM_ROW], want[NO_SYSTEM_ROW])
    require(untouched == 0.0, f"the row without a system prompt moved by {untouched:.3g}")
    effect = min(
        maxdiff(got[r], want[r]) for r in range(len(CONVS)) if r != NO_SYSTEM_ROW
    )  # each span row must move
    require(effect > MIN_EFFECT, f"span rows moved by only {effect:.3g} (blocks inactive?)")
    return untouched, 0.0, f"no-system row bit-exact; span rows move >= {effect:.3g}"


def check_cache(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    wrapped = perturb(wrapped_model(arch, device, tok))
    batch = encode(tok, device, side="left")
    cached = greedy(wrapped, batch, tok, use_cache=True)
    uncached = greedy(wrapped, batch, tok, use_cache=False)
    mismatched = int((cached != uncached).sum()) if cached.shape == uncached.shape else -1
    # the logits of a token-by-token cached decode against one full recompute of the sequence
    t0 = batch["input_ids"].shape[1]
    tail = cached[:, t0:]
    full = {
        "input_ids": cached,
        "attention_mask": torch.cat([batch["attention_mask"], torch.ones_like(tail)], 1),
        "system_mask": torch.cat([batch["system_mask"], torch.zeros_like(tail)], 1),
    }
    want = logits(wrapped, full)
    with torch.no_grad():
        out = wrapped(**batch, use_cache=True)
        steps, cache = [out.logits.float()], hf.output_cache(out)
        require(cache is not None, "a use_cache=True forward returned no cache")
        for t in range(t0, cached.shape[1]):
            out = wrapped(
                input_ids=cached[:, t : t + 1],
                attention_mask=full["attention_mask"][:, : t + 1],
                use_cache=True,
                **hf.cache_kwargs(wrapped, cache),
            )
            steps.append(out.logits.float())
            cache = hf.output_cache(out) or cache
    diff = maxdiff(torch.cat(steps, 1), want)
    require(mismatched == 0, f"cached and uncached generation differ in {mismatched} tokens")
    require(diff <= FP32_TOL, f"cached decode vs full recompute: logits differ by {diff:.3g}")
    return diff, FP32_TOL, f"{tail.shape[1]} new tokens equal; step logits vs recompute"


def check_batch(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    wrapped = perturb(wrapped_model(arch, device, tok))
    out_l = logits(wrapped, encode(tok, device, side="left"))
    out_r = logits(wrapped, encode(tok, device, side="right"))
    diff = 0.0
    for b, conv in enumerate(CONVS):
        single = logits(wrapped, encode(tok, device, [conv]))[0]
        n = single.shape[0]
        diff = max(diff, maxdiff(out_r[b, :n], single), maxdiff(out_l[b, -n:], single))
    require(diff <= FP32_TOL, f"batched vs single logits differ by {diff:.3g}")
    return diff, FP32_TOL, "left and right padded batch vs each row alone"


def check_bf16_identity(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    base = base_model(arch, device).to(torch.bfloat16)
    wrapped = calyrex.wrap(
        base_model(arch, device).to(torch.bfloat16),
        calyrex.CalyrexConfig(placement="all"),
        tokenizer=tok,
        seed=0,
    )
    dtypes = {p.dtype for p in adapter_params(wrapped).values()}
    require(dtypes == {torch.bfloat16}, f"adapter weights in {dtypes}, not bf16")
    batch = encode(tok, device, side="left")
    got, want = logits(wrapped, batch), logits(base, without_mask(batch))
    diff = maxdiff(got, want)
    require(torch.equal(got, want), f"bf16 wrapped logits differ from the base by {diff:.3g}")
    return diff, 0.0, "model in bf16, placement=all"


def check_bf16_forward(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    # a milder perturbation than elsewhere: at std 0.3 the random blocks amplify rounding to
    # ~4x the base model's own bf16 error; at 0.1 the two are alike (both shown in the note)
    wrapped = perturb(wrapped_model(arch, device, tok), std=0.1)
    batch = encode(tok, device, side="left")
    real = batch["attention_mask"].bool()  # padded positions' logits are not compared
    ref = logits(wrapped, batch)[real]
    scale = float(ref.abs().max())
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        autocast = logits(wrapped, batch)[real]
    low = copy.deepcopy(wrapped).to(torch.bfloat16)
    require(
        {p.dtype for p in low.parameters()} == {torch.bfloat16}, "model.to(bf16) left fp32 weights"
    )
    in_bf16 = logits(low, batch)[real]
    for name, out in (("autocast", autocast), ("bf16 weights", in_bf16)):
        require(bool(torch.isfinite(out).all()), f"{name}: non-finite logits")
    d_auto, d_low = maxdiff(autocast, ref), maxdiff(in_bf16, ref)
    base = base_model(arch, device)
    d_base = maxdiff(
        logits(copy.deepcopy(base).to(torch.bfloat16), without_mask(batch))[real],
        logits(base, without_mask(batch))[real],
    )  # the frozen base model's own bf16 error, for scale
    diff = max(d_auto, d_low)
    tol = BF16_REL_TOL * scale
    require(diff <= tol, f"bf16 vs fp32: autocast {d_auto:.3g}, weights {d_low:.3g} > {tol:.3g}")
    # not vacuous: bf16 must actually have run (fp32 would match bit for bit)
    require(d_auto > 0.0 and d_low > 0.0, "bf16 logits equal fp32 bit for bit: bf16 did not run")
    return diff, tol, f"autocast {d_auto:.2g}, bf16 weights {d_low:.2g}, base model {d_base:.2g}"


def check_bf16_train(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    wrapped = perturb(wrapped_model(arch, device, tok)).train()
    batch = encode(tok, device, [CONVS[0], CONVS[2]], side="right")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    adapter = adapter_params(wrapped)
    trainable = {n for n, p in wrapped.named_parameters() if p.requires_grad}
    require(trainable == set(adapter), f"trainable != adapter params: {trainable ^ set(adapter)}")
    before = {n: p.detach().clone() for n, p in wrapped.named_parameters()}
    opt = torch.optim.AdamW([p for p in wrapped.parameters() if p.requires_grad], lr=1e-3)
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        loss = wrapped(**batch, labels=labels).loss
    require(bool(torch.isfinite(loss)), f"loss {float(loss.detach())} is not finite")
    loss.backward()
    with_grad = {n for n, p in wrapped.named_parameters() if p.grad is not None}
    require(
        with_grad == set(adapter), f"grads outside/missing: {sorted(with_grad ^ set(adapter))[:3]}"
    )
    bad = [n for n, p in adapter.items() if not bool(torch.isfinite(p.grad).all())]
    require(not bad, f"non-finite gradients in {bad[:3]}")
    zero = [n for n, p in adapter.items() if not bool(p.grad.abs().sum() > 0)]
    require(not zero, f"zero gradients in {zero[:3]}")
    opt.step()
    moved = {n for n, p in wrapped.named_parameters() if not torch.equal(p.detach(), before[n])}
    require(moved == set(adapter), f"the step moved {sorted(moved ^ set(adapter))[:3]} wrongly")
    frozen_change = max(  # what the step did to the frozen base weights (must be nothing)
        maxdiff(p.detach(), before[n]) for n, p in wrapped.named_parameters() if n not in adapter
    )
    loss_value = float(loss.detach())
    return (
        frozen_change,
        0.0,
        f"loss {loss_value:.3f}; {len(adapter)} adapter tensors: grads finite, non-zero; base unchanged",
    )


def check_save_load(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
    wrapped = perturb(wrapped_model(arch, device, tok))
    batch = encode(tok, device, side="left")
    want, tokens = logits(wrapped, batch), greedy(wrapped, batch, tok)
    with tempfile.TemporaryDirectory() as tmp:
        calyrex.save_adapter(wrapped, tmp)
        require((Path(tmp) / WEIGHTS_NAME).is_file(), f"no {WEIGHTS_NAME} written")
        require((Path(tmp) / CONFIG_NAME).is_file(), f"no {CONFIG_NAME} written")
        loaded = calyrex.load_adapter(base_model(arch, device), tmp).eval()
        try:
            calyrex.load_adapter(base_model(arch, device, seed=1), tmp)
            refused = False
        except calyrex.AdapterError:
            refused = True
    on_device(loaded, device)
    got = logits(loaded, batch)
    diff = maxdiff(got, want)
    require(torch.equal(got, want), f"loaded logits differ by {diff:.3g}")
    require(torch.equal(greedy(loaded, batch, tok), tokens), "loaded greedy tokens differ")
    require(refused, "an adapter loaded onto another base model (seed 1) was not refused")
    return diff, 0.0, "logits + tokens bit-exact; other base refused"


def check_baseline(method: str) -> Callable[[str, Any, torch.device], tuple[float, float, str]]:
    def check(arch: str, tok: Any, device: torch.device) -> tuple[float, float, str]:
        base = base_model(arch, device)
        config = calyrex.CalyrexConfig(placement=PLACEMENT)
        model = perturb(calyrex.adapt(base_model(arch, device), method, config, seed=0))
        on_device(model, device)
        batch = encode(tok, device, side="left")
        got, plain = logits(model, batch), logits(model, without_mask(batch))
        require(bool(torch.isfinite(got).all()), "non-finite logits")
        diff = maxdiff(got, plain)
        require(torch.equal(got, plain), f"system_mask changed the logits by {diff:.3g}")
        effect = maxdiff(got, logits(base, without_mask(batch)))
        require(effect > MIN_EFFECT, f"perturbed {method} moves logits by only {effect:.3g}")
        tokens = greedy(model, batch, tok)
        require(torch.equal(tokens, greedy(model, without_mask(batch), tok)), "generate differs")
        with tempfile.TemporaryDirectory() as tmp:
            calyrex.save_adapter(model, tmp)
            loaded = calyrex.load_adapter(base_model(arch, device), tmp).eval()
            d_load = maxdiff(logits(loaded, batch), got)
        require(d_load == 0.0, f"save → load changed the logits by {d_load:.3g}")
        return diff, 0.0, f"mask ignored exactly; adapter moves logits {effect:.2g}; save/load ok"

    return check


CHECKS: list[tuple[str, Callable[[str, Any, torch.device], tuple[float, float, str]]]] = [
    ("identity_at_init", check_identity),
    ("blocks_act", check_blocks_act),
    ("cache_vs_no_cache", check_cache),
    ("batch_vs_single", check_batch),
    ("bf16_identity_at_init", check_bf16_identity),
    ("bf16_forward", check_bf16_forward),
    ("bf16_train_step", check_bf16_train),
    ("save_load", check_save_load),
    ("lora/forward", check_baseline("lora")),
    ("parallel_mlp/forward", check_baseline("parallel_mlp")),
]


# -- running -----------------------------------------------------------------------------------
def run_one(name: str, arch: str, check: Callable, tok: Any, device: torch.device) -> dict:
    entry: dict[str, Any] = {"check": name, "arch": arch}
    sync(device)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            diff, tol, note = check(arch, tok, device)
            entry.update(passed=True, max_abs_diff=diff, tol=tol, note=note)
        except CheckFailed as err:
            entry.update(passed=False, max_abs_diff=None, tol=None, note=str(err))
        except Exception as err:  # noqa: BLE001 — an error is a failed check, reported in full
            entry.update(passed=False, max_abs_diff=None, tol=None, note=f"error: {err!r}")
            entry["traceback"] = traceback.format_exc()
    sync(device)
    entry["seconds"] = round(time.perf_counter() - start, 3)
    messages = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    if messages:
        entry["warnings"] = messages[:5]
    return entry


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "calyrex": calyrex.__version__,
        "device": str(device),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    try:
        import peft

        env["peft"] = peft.__version__
    except ImportError:
        env["peft"] = None
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
        env["bf16_supported"] = torch.cuda.is_bf16_supported()
    else:
        env["device_name"] = platform.processor() or platform.machine()
    return env


def cell(value: Any) -> str:
    return "-" if value is None else f"{value:.2e}" if isinstance(value, float) else str(value)


def print_table(results: list[dict]) -> None:
    rows = [
        (
            f"{r['arch']}/{r['check']}",
            "PASS" if r["passed"] else "FAIL",
            cell(r["max_abs_diff"]),
            cell(r["tol"]),
            f"{r['seconds']:.2f}",
            r["note"][:90],
        )
        for r in results
    ]
    head = ("check", "result", "max|diff|", "tol", "s", "note")
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(5)]
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[5])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="cuda_check.json", help="JSON results file")
    parser.add_argument(
        "--archs", default=",".join(ARCHS), help="comma-separated, of " + ",".join(ARCHS)
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    torch.set_float32_matmul_precision("highest")  # fp32 checks are fp32, not TF32
    transformers.logging.set_verbosity_error()
    env = environment(device)
    print(
        f"torch {env['torch']}  transformers {env['transformers']}  peft {env['peft']}  "
        f"device {env['device']} ({env['device_name']})"
    )
    start = time.perf_counter()
    results = []
    for arch in args.archs.split(","):
        tok = tiny_tokenizer(ARCHS[arch])
        for name, check in CHECKS:
            results.append(run_one(name, arch, check, tok, device))
    total = time.perf_counter() - start
    print_table(results)
    failed = [f"{r['arch']}/{r['check']}" for r in results if not r["passed"]]
    summary = {
        "environment": env,
        "all_passed": not failed,
        "failed": failed,
        "seconds": round(total, 2),
        "results": results,
    }
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{len(results) - len(failed)}/{len(results)} passed in {total:.1f}s -> {args.out}")
    for r in results:
        if "traceback" in r:
            print(f"\n{r['arch']}/{r['check']}:\n{r['traceback']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
