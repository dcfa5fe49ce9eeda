"""``calyrex eval``'s running, apart from any scorer: suites chosen, finished and skipped suites,
replies saved as they come and resumed, a suite's clock and token counts, the summary; the file
helpers; the chat generator's batching, skips and counts; the seconds over attempts.

The runner is driven with a counting benchmark (no model) put in place of the registry's."""

import json
import time
from pathlib import Path

import pytest
import torch

from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.core.attempts import Attempts
from calyrex.eval import PAPER, runner
from calyrex.eval.bench import Benchmark, EvalConfig
from calyrex.eval.data import DataFormatError, read_rows, require, shared_data_dir
from calyrex.eval.generate import Generator, Skip, new_cost
from calyrex.eval.judge import JudgeUnavailable

ITEMS = [{"id": f"q{i}", "text": "x" * (i + 1)} for i in range(5)]


class FakeGenerator:
    """Answers an item with its text upper-cased; counts a prompt and its tokens per reply, and
    fails after ``fail_after`` replies (an interrupted run)."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.asked: list[str] = []
        self.stats = new_cost()
        self.fail_after = fail_after

    def reply(self, item: dict) -> str:
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            raise KeyboardInterrupt("stopped")
        self.asked.append(item["id"])
        self.stats["prompts"] += 1
        self.stats["prompt_tokens"] += len(item["text"])
        return item["text"].upper()


class Counting(Benchmark):
    """A suite over :data:`ITEMS` (or none); its metric: the share of replies that are the item's
    text upper-cased, and a flag; its details one row per item."""

    name = "counting"
    items = ITEMS

    def load(self, data, ctx):
        return list(self.items)

    def generate(self, items, ctx):
        for it in items:
            yield {"id": it["id"], "response": ctx.generator.reply(it)}

    def score(self, items, rows, ctx):
        by = {r["id"]: r["response"] for r in rows}
        right = [by.get(it["id"]) == it["text"].upper() for it in items]
        return {
            "metrics": {"right": sum(right) / len(items), "n": len(items), "complete": True},
            "details": [{"id": it["id"], "reply": by.get(it["id"])} for it in items],
        }


class Judged(Counting):
    name = "judged"
    needs_judge = True


class Empty(Counting):
    name = "empty"
    items = []


SUITES = {c.name: c for c in (Counting, Judged, Empty)}


@pytest.fixture
def fake_suites(monkeypatch):
    monkeypatch.setattr(runner, "make_benchmark", lambda name: SUITES[name]())


def run(out: Path, *suites: str, generator=None, judge=lambda: object(), loads=None):
    """``runner.evaluate`` with a loader handing out ``generator`` (counted in ``loads``)."""

    def loader():
        if loads is not None:
            loads.append(1)
        return generator or FakeGenerator(), None

    return runner.evaluate(list(suites), out, EvalConfig(), loader=loader, judge_factory=judge)


def record(out: Path, suite: str) -> dict:
    return json.loads((out / f"{suite}.json").read_text())


def replies(out: Path, suite: str) -> list[dict]:
    return read_rows(out / f"{suite}.responses.jsonl")


# --- which suites run ---------------------------------------------------------------------------


def test_suites_are_named_once_in_order_and_an_unknown_name_is_refused():
    first = next(iter(PAPER))
    assert runner.resolve_suites(f"{first},paper") == list(PAPER)
    assert runner.resolve_suites(f" {first} ,, ") == [first]
    with pytest.raises(ValueError, match=r"unknown suite 'nope'; choose from paper"):
        runner.resolve_suites(f"{first},nope")


def test_a_finished_suite_is_not_run_again_and_a_skipped_one_is(fake_suites, tmp_path):
    def unreachable():
        raise JudgeUnavailable("the judge is unreachable")

    summary = run(tmp_path, "counting", "judged", judge=unreachable)
    assert summary["suites"]["counting"]["status"] == "ok"
    skipped = summary["suites"]["judged"]
    assert skipped == {"status": "skipped", "metrics": {}, "reason": "the judge is unreachable"}
    assert record(tmp_path, "judged")["status"] == "skipped"
    md = (tmp_path / "summary.md").read_text()
    assert "| judged | (skipped) | the judge is unreachable |" in md
    # the next run: the finished suite is not run again (its saved replies gone, it would ask
    # the model for them), the skipped one runs with a judge
    (tmp_path / "counting.responses.jsonl").unlink()
    gen = FakeGenerator()
    summary = run(tmp_path, "counting", "judged", generator=gen)
    assert gen.asked == [it["id"] for it in ITEMS]  # the judged suite's items only
    assert summary["suites"]["judged"]["status"] == "ok"
    assert "reason" not in summary["suites"]["judged"]


def test_a_suite_with_no_items_is_refused_by_name(fake_suites, tmp_path):
    with pytest.raises(ValueError, match="empty: the data has no items"):
        run(tmp_path, "empty")


def test_the_model_is_loaded_once_for_every_suite(fake_suites, tmp_path):
    loads: list[int] = []
    run(tmp_path, "counting", "judged", loads=loads)
    assert loads == [1]


def test_the_summary_names_a_suite_without_record_and_shows_numbers_only(tmp_path):
    (tmp_path / "a.json").write_text(
        json.dumps({"status": "ok", "metrics": {"rate": 0.5, "n": 4, "flag": True, "by": {}}})
    )
    summary = runner.write_summary(tmp_path, {"label": "x", "suites": ["a", "b"]})
    assert summary["suites"]["a"] == {"status": "ok", "metrics": {"rate": 0.5, "n": 4}}
    assert summary["suites"]["b"] == {"status": "missing", "metrics": {}}
    assert "| b | (missing) |  |" in (tmp_path / "summary.md").read_text()


def test_details_are_written_one_line_per_item(fake_suites, tmp_path):
    run(tmp_path, "counting")
    lines = (tmp_path / "counting.details.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [it["id"] for it in ITEMS]
    assert "details" not in record(tmp_path, "counting")


# --- replies saved as they come, and resumed ----------------------------------------------------


def test_an_interrupted_suite_keeps_its_replies_and_resumes_from_them(fake_suites, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "counting", generator=FakeGenerator(fail_after=2))
    saved = replies(tmp_path, "counting")
    assert [r["id"] for r in saved] == ["q0", "q1"]  # each reply saved as it came
    clock = json.loads((tmp_path / "counting.clock.json").read_text())
    assert clock["seconds"] >= 0  # and the seconds up to it
    assert not (tmp_path / "counting.json").exists()
    # a saved reply is kept as it was, not asked again: mark one to tell it apart
    saved[0]["response"] = "SAVED"
    (tmp_path / "counting.responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in saved))
    gen = FakeGenerator()
    run(tmp_path, "counting", generator=gen)
    assert gen.asked == ["q2", "q3", "q4"]
    details = [json.loads(line) for line in (tmp_path / "counting.details.jsonl").open()]
    assert details[0]["reply"] == "SAVED" and details[1]["reply"] == "X" * 2
    assert record(tmp_path, "counting")["metrics"]["right"] == pytest.approx(4 / 5)
    assert len(replies(tmp_path, "counting")) == len(ITEMS)


def test_a_clock_without_its_replies_starts_from_zero(fake_suites, tmp_path):
    (tmp_path / "counting.clock.json").write_text(json.dumps({"seconds": 1000.0}))
    run(tmp_path, "counting")
    got = record(tmp_path, "counting")
    assert got["seconds"] < 1000 and got["seconds"] == pytest.approx(
        got["seconds_this_attempt"], abs=0.1
    )


def test_each_suite_counts_its_own_tokens(fake_suites, tmp_path):
    gen = FakeGenerator()
    run(tmp_path, "counting", "judged", generator=gen)
    own = sum(len(it["text"]) for it in ITEMS)
    for suite in ("counting", "judged"):
        tokens = record(tmp_path, suite)["tokens"]
        assert (tokens["prompts"], tokens["prompt_tokens"]) == (len(ITEMS), own)


# --- the file helpers ---------------------------------------------------------------------------


def test_rows_are_read_from_a_json_list_or_json_lines_and_anything_else_is_named(tmp_path):
    listed = tmp_path / "rows.json"
    listed.write_text(json.dumps([{"id": 1}, {"id": 2}], indent=2))
    assert read_rows(listed) == [{"id": 1}, {"id": 2}]
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"id": 1}\n\n{"id": 2}\n')
    assert read_rows(lines) == [{"id": 1}, {"id": 2}]
    lines.write_text('{"id": 1}\n[1, 2]\n')
    with pytest.raises(DataFormatError, match="must hold a list of JSON objects"):
        read_rows(lines)
    lines.write_text('{"id": 1\n')
    with pytest.raises(DataFormatError, match="is not valid JSON/JSONL"):
        read_rows(lines)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_rows(tmp_path / "none.jsonl")


def test_a_row_lacking_a_field_is_named_with_the_fields_expected():
    require([{"a": 1, "b": 2}], ["a", "b"], "f.jsonl")
    with pytest.raises(DataFormatError, match=r"f.jsonl: row 1 lacks \['b'\]"):
        require([{"a": 1, "b": 2}, {"a": 1}], ["a", "b"], "f.jsonl")


def test_the_shared_data_folder_can_be_moved(monkeypatch, tmp_path):
    monkeypatch.setenv("CALYREX_SHARED_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path
    monkeypatch.delenv("CALYREX_SHARED_DATA")
    assert shared_data_dir().parts[-2:] == ("shared", "data")


# --- the chat generator ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generator():
    torch.manual_seed(0)
    tok = tiny_tokenizer("chatml")
    return Generator(tiny_model("qwen2"), tok, max_new_tokens=6, batch_size=3)


CONVERSATIONS = [
    [{"role": "system", "content": "Be brief " * n}, {"role": "user", "content": f"q {n}"}]
    for n in (5, 1, 9, 3, 7)
]


def test_a_batch_gives_each_conversation_its_own_reply_in_order(generator):
    """Batched replies (length-sorted, left-padded) equal the one-by-one replies, in the order
    asked, and the tokenizer keeps its padding side."""
    tok = generator.tokenizer
    side, tok.padding_side = tok.padding_side, "right"  # set up for training: generation pads left
    try:
        batched = generator.chat(CONVERSATIONS)
        assert tok.padding_side == "right"
        alone = [generator.chat([c])[0] for c in CONVERSATIONS]
    finally:
        tok.padding_side = side
    assert batched == alone
    assert len(set(alone)) > 1  # the prompts differ in their replies: order is tested


def test_a_prompt_whose_reply_would_pass_the_window_is_a_skip(generator):
    length = generator.prompt_length(CONVERSATIONS[0])
    window, generator.window = generator.window, length + 3  # the prompt fits, 6 new tokens do not
    try:
        out = generator.chat(CONVERSATIONS[:1])
        nll = generator.target_nll(CONVERSATIONS[0], "a long target " * 10)
    finally:
        generator.window = window
    assert isinstance(out[0], Skip) and f"prompt of {length} tokens + 6 new tokens" in out[0].reason
    assert isinstance(nll, Skip) and "exceeds the context window" in nll.reason
    assert isinstance(generator.target_nll(CONVERSATIONS[0], "ok"), float)


def test_the_window_is_the_models_own(generator):
    assert generator.window == generator.model.config.max_position_embeddings


def test_a_reply_is_decoded_without_special_tokens_and_counted_up_to_its_end(generator):
    tok = generator.tokenizer
    end = tok.convert_tokens_to_ids("<|im_end|>")
    words = tok("hello there", add_special_tokens=False)["input_ids"]
    model = generator.model
    before = dict(generator.stats)

    def fixed(input_ids, **kw):  # a reply of two words, its end of turn, a word, padding
        tail = torch.tensor([[*words, end, words[0], tok.pad_token_id]])
        return torch.cat([input_ids, tail.expand(input_ids.shape[0], -1)], 1)

    model.generate, kept = fixed, model.generate
    try:
        reply = generator.chat(CONVERSATIONS[1:3])
    finally:
        model.generate = kept
    assert all(r.startswith("hello there") and "<|im_end|>" not in r for r in reply)
    used = {k: generator.stats[k] - before[k] for k in before}
    assert used["new_tokens"] == 2 * len(words)  # nothing from the end on counted
    lengths = [generator.prompt_length(c) for c in CONVERSATIONS[1:3]]
    assert used["prompts"] == 2 and used["prompt_tokens"] == sum(lengths)
    assert used["padded_tokens"] == 2 * max(lengths) > used["prompt_tokens"]


# --- seconds over attempts ------------------------------------------------------------------------


def test_seconds_hold_the_earlier_attempts_and_this_one_apart():
    clock = Attempts(before=100.0, started=time.perf_counter() - 2.0)
    figures = clock.figures(2)
    assert 2.0 <= figures["seconds_this_attempt"] < 3.0
    assert figures["seconds"] == pytest.approx(100.0 + figures["seconds_this_attempt"], abs=0.01)
    assert clock.seconds >= 102.0
