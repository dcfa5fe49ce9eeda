"""``auto`` precision (``calyrex.backbones.precision``): bf16 on a CPU only where its flags say
it computes bf16 natively *and* a timed matmul agrees; torch's dtype names as aliases; one
choice for every rank of a run. The clocks and the CPU's flags are replaced by known ones."""

import pytest
import torch

from calyrex.backbones import precision


@pytest.fixture(autouse=True)
def fresh_choice():
    precision.choose.cache_clear()  # measured once per process: each test measures its own
    yield
    precision.choose.cache_clear()


def machine(monkeypatch, flags, speedup):
    monkeypatch.setattr(precision, "cpu_flags", lambda: set(flags))
    monkeypatch.setattr(precision, "matmul_speedup", lambda: speedup)


@pytest.mark.parametrize(
    "flags, speedup, chosen, why",
    [
        ({"amx_bf16", "avx512_bf16"}, 5.4, "bf16", "CPU has amx_bf16, avx512_bf16; bf16 matmul"),
        ({"avx512_bf16"}, 1.1, "fp32", "CPU has avx512_bf16 but bf16 matmul 1.10× fp32's speed"),
        (set(), 1.5, "fp32", "CPU has no amx_bf16 / avx512_bf16; bf16 matmul 1.50×"),
        (set(), 0.01, "fp32", "CPU has no amx_bf16 / avx512_bf16"),
    ],
)
def test_auto_takes_bf16_only_with_the_flags_and_a_measured_speedup(
    monkeypatch, flags, speedup, chosen, why
):
    machine(monkeypatch, flags, speedup)
    got = precision.choose("cpu")
    assert got.precision == chosen and got.reason.startswith(why)


def test_the_speedup_is_fp32_time_over_bf16_time(monkeypatch):
    times = {torch.float32: 4.0, torch.bfloat16: 1.0}  # bf16 four times faster

    class Clock:
        now = 0.0

    def timed_matmul(self, other):  # each product advances the clock by its dtype's time
        Clock.now += times[self.dtype]
        return self

    monkeypatch.setattr(precision.time, "perf_counter", lambda: Clock.now)
    monkeypatch.setattr(torch.Tensor, "__matmul__", timed_matmul)
    assert precision.matmul_speedup(size=4, repeats=2, trials=2) == pytest.approx(4.0)


def test_a_dtype_is_named_as_torch_or_calyrex_names_it():
    assert precision.resolve("bfloat16").precision == "bf16"
    assert precision.resolve("float32") == precision.Choice("fp32", "asked for")
    assert precision.resolve("fp16").dtype is torch.float16
    with pytest.raises(ValueError, match="precision must be one of"):
        precision.resolve("fp8")


def test_every_rank_takes_rank_0s_choice(monkeypatch):
    """Two ranks that measured differently train in rank 0's precision (the broadcast is
    replaced by what gloo would deliver: rank 0's code)."""
    dist = torch.distributed
    sent = []

    def broadcast(code, src):
        sent.append(src)
        code.fill_(list(precision.DTYPES).index("fp32"))  # rank 0 chose fp32

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(dist, "get_backend", lambda: "gloo")
    monkeypatch.setattr(dist, "broadcast", broadcast)
    mine = precision.Choice("bf16", "measured here")
    agreed = precision.agreed(mine)
    assert sent == [0] and agreed.precision == "fp32"
    assert agreed.reason == "rank 0's choice (bf16 was measured on this rank)"
    assert precision.agreed(precision.Choice("fp32", "x")) == precision.Choice("fp32", "x")
