"""Smoke test of ``calyrex bench --sections serve``'s measurements against an in-process server."""

import pytest

pytest.importorskip("fastapi")

from calyrex.bench import serve  # noqa: E402
from calyrex.bench.config import BenchConfig  # noqa: E402
from calyrex.serve.local import local_server  # noqa: E402
from serve_helpers import cal_model, engine  # noqa: E402


def test_serve_bench_measures_and_tabulates(tok):
    system = serve.system_prompt(tok, 40)
    assert 30 <= len(tok(system, add_special_tokens=False)["input_ids"]) <= 40
    with local_server(engine(cal_model(tok), tok)) as url:
        t = serve.ttft(url, system, repeats=1)
        p = serve.throughput(url, system, streams=2, requests=1, tokens=3)
    assert t["cached_tokens"] > 0 and t["cold_ttft_s"] > 0 and t["cached_ttft_s"] > 0
    assert p["requests"] == 2 and p["tokens"] == 6  # ignore_eos: exactly max_tokens each
    result = {
        "case": {"tokens": 3, "requests": 1}, "model": "tiny", "cal_layers": [2, 3],
        "system_tokens": 40, "ttft": t,
        "throughput": [{"streams": 2, "base": p, "calyrex": p, "ratio_vs_base": 1.0},
                       {"streams": 16, "skipped": "time limit"}],
        "concurrency": {"requests": 2, "sequential": p, "concurrent": p, "ratio": 1.0},
    }  # fmt: skip
    summary = serve.summary(result)
    assert set(summary) == {"serve_ttft_ratio_cached_vs_cold", "serve_throughput_ratio_vs_base_at_2",
                            "serve_concurrent_vs_sequential"}  # fmt: skip
    table = serve.markdown(result)
    assert table.count("\n") == 5 and "skipped" in table


def test_serve_is_a_section_but_not_a_default_one():
    cfg = BenchConfig(preset="quick", sections=["serve"]).resolve()
    assert cfg.serve_model == "tiny" and cfg.serve_streams == [1, 2, 4]
    assert "serve" not in BenchConfig().sections
