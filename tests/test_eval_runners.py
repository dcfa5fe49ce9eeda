"""Runners on small fixtures in the real file formats: hand-made responses with known scores,
and each runner end to end (generation → scores) on a tiny model through ``calyrex eval``."""

import json
from pathlib import Path

import pytest
import torch

import calyrex
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.cli import main
from calyrex.eval.glaive import load_glaive, parse_call

FIX = Path(__file__).parent / "fixtures" / "eval"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny base model + tokenizer on disk and a CAL adapter with random weights for it."""
    root = tmp_path_factory.mktemp("runners")
    tok = tiny_tokenizer("chatml")
    tiny_model("qwen2").save_pretrained(root / "base")
    tok.save_pretrained(root / "base")
    wrapped = calyrex.wrap(tiny_model("qwen2"), calyrex.CalyrexConfig(placement="last"))
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if calyrex.is_adapter_param(name) and "norm" not in name:
                p.normal_(0, 0.3)
    wrapped.save_adapter(root / "adapter")
    return root


def score(suite, responses, data, tmp_path):
    args = ["eval", "--suite", suite, "--responses", str(responses), "--data", str(data)]
    assert main(args + ["--out", str(tmp_path)]) == 0
    return json.loads((tmp_path / f"{suite}.json").read_text())


def run_model(saved, suite, data, tmp_path, *extra):
    args = ["eval", "--suite", suite, "--model", str(saved / "base"), "--adapter"]
    args += [str(saved / "adapter"), "--data", str(data), "--out", str(tmp_path)]
    rc = main(args + ["--max-new-tokens", "4", "--batch-size", "2", "--device", "cpu", *extra])
    record = json.loads((tmp_path / f"{suite}.json").read_text())
    return rc, record


def test_tensortrust_metrics(tmp_path):
    record = score(
        "tensortrust", FIX / "tensortrust_responses.jsonl", FIX / "tensortrust", tmp_path
    )
    m = record["metrics"]
    # hijacking: 1 valid and hijacked, 2 invalid; extraction: 7 valid and leaked, 8 holds
    assert (m["hijacking_validity"], m["hijacking_holds"], m["HRR"]) == (0.5, 0.0, 0.0)
    assert (m["extraction_validity"], m["extraction_holds"], m["ERR"]) == (1.0, 0.5, 0.5)
    assert m["n_hijacking"] == m["n_extraction"] == 2


def test_glaive_loader_and_metrics(tmp_path):
    items = load_glaive(str(FIX / "glaive.json"))
    assert [it["id"] for it in items] == ["0", "1"]  # the row without a call is not an item
    assert items[1]["messages"][-1] == {
        "role": "user",
        "content": "My weight is 70 kg and height 1.75 m. What is my BMI?",
    }
    assert (
        items[1]["messages"][1]["role"] == "user" and items[1]["messages"][2]["role"] == "assistant"
    )
    assert (items[0]["name"], items[0]["arguments"]) == (
        "get_news_headlines",
        {"country": "United States"},
    )
    record = score("glaive_fc", FIX / "glaive_responses.jsonl", FIX / "glaive.json", tmp_path)
    assert record["metrics"] == {
        "call_name_acc": 1.0,
        "args_exact_match": 0.5,
        "json_valid": 1.0,
        "n": 2,
    }


def test_parse_call_formats():
    assert parse_call('<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>') == (
        "f",
        {"a": 1},
    )
    assert parse_call('<functioncall> {"name": "f", "arguments": \'{"a": 1}\'}') == ("f", {"a": 1})
    assert parse_call("I will not call anything.") is None
    assert parse_call('<functioncall> {"name": "f", "arguments": \'{"a": }\'}') is None


@pytest.mark.parametrize(
    "suite,data",
    [
        ("tensortrust", FIX / "tensortrust"),
        ("glaive_fc", FIX / "glaive.json"),
        ("ifeval", FIX / "ifeval_input.jsonl"),
    ],
)
def test_end_to_end_on_a_tiny_model(saved, tmp_path, suite, data):
    rc, record = run_model(saved, suite, data, tmp_path)
    assert rc == 0 and record["status"] == "ok"
    rows = [
        json.loads(line)
        for line in (tmp_path / f"{suite}.responses.jsonl").read_text().splitlines()
    ]
    assert len(rows) == record["n_items"] and all(isinstance(r["response"], str) for r in rows)
    cost = record["tokens"]  # what the suite computed, generated or read with one prefill
    assert cost["prompts"] >= 1 and cost["padded_tokens"] >= cost["prompt_tokens"] > 0
    # the responses file is the --responses format: scoring it alone gives the same metrics
    again = score(suite, tmp_path / f"{suite}.responses.jsonl", data, tmp_path / "rescore")
    assert again["metrics"] == record["metrics"]


def test_too_long_context_is_a_recorded_skip(saved, tmp_path):
    """A prompt whose reply would run past the window is skipped and recorded; each prompt is
    measured with its own reply length (a grant verdict reads 8 tokens, an extraction 500)."""
    rc, record = run_model(
        saved, "tensortrust", FIX / "tensortrust", tmp_path, "--max-new-tokens", "500"
    )
    assert rc == 0
    assert record["skipped"] and all(s.startswith("extraction:") for s in record["skipped"])
    assert all(s.endswith(":attack") for s in record["skipped"])
    rows = [json.loads(line) for line in (tmp_path / "tensortrust.responses.jsonl").open()]
    assert {r["id"] for r in rows if r.get("skipped")} == set(record["skipped"])
    assert all(
        "exceeds the model's context window of 512" in r["skipped"]
        for r in rows
        if r.get("skipped")
    )
    assert len(record["skipped"]) < record["n_items"]  # the grant prompts fit and ran


def test_a_peft_lora_adapter_is_loaded_through_peft(saved, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    from calyrex.adapters.loading import load_model

    base = tiny_model("qwen2")
    lora = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    lora.save_pretrained(tmp_path / "lora")
    model, _ = load_model(
        str(saved / "base"), str(tmp_path / "lora"), dtype="float32", device="cpu"
    )
    assert isinstance(model, PeftModel)
    args = ["eval", "--suite", "glaive_fc", "--model", str(saved / "base"), "--adapter"]
    args += [
        str(tmp_path / "lora"),
        "--data",
        str(FIX / "glaive.json"),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(args + ["--max-new-tokens", "2", "--device", "cpu"]) == 0


def test_merge_lora_folds_lora_into_the_weights_and_keeps_other_methods(saved, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    from calyrex.adapters.loading import load_model

    # init_lora_weights=False: B random too, so the adapter changes the function
    config = LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(tiny_model("qwen2"), config).save_pretrained(tmp_path / "lora")
    base = str(saved / "base")
    load = dict(dtype="float32", device="cpu")
    plain, _ = load_model(base, **load)
    adapted, _ = load_model(base, str(tmp_path / "lora"), **load)
    merged, _ = load_model(base, str(tmp_path / "lora"), merge_lora=True, **load)
    assert isinstance(adapted, PeftModel) and not isinstance(merged, PeftModel)
    assert not any("lora_" in name for name, _ in merged.named_parameters())
    ids = torch.tensor([[5, 9, 14, 3, 7, 11]])
    mask = torch.zeros_like(ids, dtype=torch.bool)
    with torch.no_grad():
        want = adapted(input_ids=ids, system_mask=mask).logits
        got = merged(input_ids=ids, system_mask=mask).logits  # still takes the span keyword
        assert not torch.allclose(plain(input_ids=ids).logits, want, atol=1e-3)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # a method with its own pathway is not merged: the CALYREX blocks stay
    kept, _ = load_model(base, str(saved / "adapter"), merge_lora=True, **load)
    assert calyrex.is_calyrex(kept)
    args = ["eval", "--suite", "glaive_fc", "--model", base, "--adapter", str(tmp_path / "lora")]
    args += ["--data", str(FIX / "glaive.json"), "--out", str(tmp_path / "o"), "--merge-lora"]
    assert main(args + ["--max-new-tokens", "2", "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "o" / "run.json").read_text())["merge_lora"] is True


def test_a_resumed_suites_seconds_hold_its_earlier_attempts(saved, tmp_path):
    """``NAME.clock.json`` carries the seconds up to the last saved reply; a suite resumed from
    its saved replies adds its own to them, one never interrupted records just its attempt."""
    data = FIX / "tensortrust"
    rc, whole = run_model(saved, "tensortrust", data, tmp_path / "whole")
    assert rc == 0 and whole["seconds"] == pytest.approx(whole["seconds_this_attempt"], abs=0.1)
    clock = json.loads((tmp_path / "whole" / "tensortrust.clock.json").read_text())
    # the record rounds to 0.1 s, the clock to 0.01 s: a fast machine's attempt may read 0.0
    assert 0 <= clock["seconds"] <= whole["seconds"] + 0.05
    # an attempt interrupted after half its replies, as if it had taken 1000 s to save them
    out = tmp_path / "resumed"
    out.mkdir()
    saved_rows = (tmp_path / "whole" / "tensortrust.responses.jsonl").read_text().splitlines()
    half = saved_rows[: len(saved_rows) // 2]
    (out / "tensortrust.responses.jsonl").write_text("".join(r + "\n" for r in half))
    (out / "tensortrust.clock.json").write_text(json.dumps({"seconds": 1000.0}))
    rc, resumed = run_model(saved, "tensortrust", data, out)
    assert rc == 0 and resumed["n_items"] == whole["n_items"]
    assert 0 <= resumed["seconds_this_attempt"] < 1000 <= resumed["seconds"]
    assert resumed["seconds"] == pytest.approx(1000 + resumed["seconds_this_attempt"], abs=0.1)
    # saved replies without a clock (written before it, or by another suite): this attempt only
    (out / "tensortrust.json").unlink()
    (out / "tensortrust.clock.json").unlink()
    rc, again = run_model(saved, "tensortrust", data, out)
    assert again["seconds"] == pytest.approx(again["seconds_this_attempt"], abs=0.1)
