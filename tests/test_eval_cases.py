"""``calyrex eval --cases``: the file is checked line by line before a model loads, each check
holds or fails on hand-written replies, rates carry Wilson intervals, and a tiny model runs end to
end through the CLI."""

import json
from pathlib import Path

import pytest

from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.cli import main
from calyrex.eval.cases import Case, Expect, IFEvalCheck, check, load_cases, run_cases, summarize
from calyrex.eval.generate import Skip
from calyrex.eval.intervals import wilson

EXAMPLE = Path(__file__).parents[1] / "examples" / "cases.jsonl"
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
GOOD = {"id": "ok", "messages": CHAT, "expect": {"contains": ["hi"]}}


def write(tmp_path, *rows):
    """A cases file: each row is a dict (dumped) or a raw line; a blank line stands second."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    lines.insert(1, "")
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def case(**fields):
    return {**GOOD, "id": "bad", **fields}


def expect(**checks):
    return case(expect=checks)


BAD = {
    "bad JSON": ('{"id": "x",', "<line>", "not valid JSON"),
    "not an object": ("[1, 2]", "<line>", "JSON object"),
    "missing id": ({"messages": CHAT, "expect": {"contains": ["a"]}}, "id", "missing"),
    "missing messages": ({"id": "b", "expect": {"contains": ["a"]}}, "messages", "missing"),
    "missing expect": ({"id": "b", "messages": CHAT}, "expect", "missing"),
    "id not a string": (case(id=5), "id", "string"),
    "unknown field": (case(expcet={}), "expcet", "unknown field"),
    "category not a string": (case(category=["a"]), "category", "string"),
    "group empty": (case(group=""), "group", "non-empty string"),
    "messages not a list": (case(messages="hi"), "messages", "list"),
    "message without content": (case(messages=[{"role": "user"}]), "messages[0]", "content"),
    "unknown role": (
        case(messages=[{"role": "human", "content": "x"}]),
        "messages[0].role",
        "human",
    ),
    "content not a string": (
        case(messages=[{"role": "user", "content": 3}]),
        "messages[0].content",
        "string",
    ),
    "ends with the assistant": (
        case(messages=[*CHAT, {"role": "assistant", "content": "x"}]),
        "messages",
        "assistant",
    ),
    "empty expect": (case(expect={}), "expect", "empty"),
    "expect not an object": (case(expect=["contains"]), "expect", "object"),
    "unknown check": (expect(contain=["a"]), "expect.contain", "unknown check"),
    "contains a bare string": (expect(contains="arr"), "expect.contains", "list"),
    "contains an empty string": (expect(not_contains=[""]), "expect.not_contains", "non-empty"),
    "starts_with not a string": (expect(starts_with=1), "expect.starts_with", "string"),
    "invalid regex": (expect(regex="(arr"), "expect.regex", "invalid regular expression"),
    "invalid not_regex": (expect(not_regex="[a-"), "expect.not_regex", "invalid regular"),
    "unknown ifeval id": (
        expect(ifeval={"instruction_id_list": ["no:such"], "kwargs": [{}]}),
        "expect.ifeval.instruction_id_list[0]",
        "unknown instruction 'no:such'",
    ),
    "ifeval argument missing": (
        expect(
            ifeval={
                "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"num_words": 5}],
            }
        ),
        "expect.ifeval.kwargs[0]",
        "relation",
    ),
    "ifeval argument invalid": (
        expect(
            ifeval={
                "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"num_words": 5, "relation": "about"}],
            }
        ),
        "expect.ifeval.kwargs[0]",
        "about",
    ),
    "ifeval kwargs of another length": (
        expect(ifeval={"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}),
        "expect.ifeval.kwargs",
        "one per id",
    ),
    "ignore_case not a bool": (case(ignore_case="yes"), "ignore_case", "true or false"),
    "max_new_tokens zero": (case(max_new_tokens=0), "max_new_tokens", "positive"),
    "max_new_tokens a bool": (case(max_new_tokens=True), "max_new_tokens", "positive"),
    "duplicate id": ({**GOOD}, "id", "already the id of line 1"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_malformed_line_names_file_line_and_field(tmp_path, name):
    row, field, words = BAD[name]
    path = write(tmp_path, GOOD, row)  # line 1 good, line 2 blank, line 3 bad
    with pytest.raises(ValueError) as err:
        load_cases(path)
    message = str(err.value)
    assert f"{path}, line 3, field {field!r}:" in message, message
    assert words in message, message


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_cases(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="holds no cases"):
        load_cases(tmp_path / "empty.jsonl")


def test_a_good_file_loads_with_defaults(tmp_path):
    row = {**GOOD, "id": "b", "category": "c", "ignore_case": False, "max_new_tokens": 7}
    row["expect"] = {"ifeval": {"instruction_id_list": ["punctuation:no_comma"]}}
    first, second = load_cases(write(tmp_path, GOOD, row))
    assert first == Case("ok", CHAT, Expect(contains=("hi",)))
    assert (first.category, first.ignore_case, first.max_new_tokens) == ("default", True, None)
    assert second.expect.ifeval == IFEvalCheck(("punctuation:no_comma",), ({},))
    assert (second.category, second.ignore_case, second.max_new_tokens, second.line) == (
        "c",
        False,
        7,
        3,
    )


def test_the_example_file_is_valid():
    cases = load_cases(EXAMPLE)
    assert 4 <= len(cases) <= 6
    assert any(c.expect.ifeval for c in cases)


def make(ignore_case=True, **checks):
    return Case("c", CHAT, Expect(**checks), ignore_case=ignore_case)


NO_COMMA = IFEvalCheck(("punctuation:no_comma",), ({},))
FEW_WORDS = IFEvalCheck(
    ("length_constraints:number_words",), ({"num_words": 5, "relation": "less than"},)
)
CHECKS = {  # checks → (a reply that passes, a reply that fails)
    "contains": (dict(contains=("arr", "matey")), "ARR, Matey!", "Arr, friend."),
    "not_contains": (dict(not_contains=("swordfish",)), "I cannot say.", "It is SwordFish."),
    "regex": (dict(regex=r"\b\d{3}\b"), "Call 555 now", "Call 5555 now"),
    "regex ignoring case": (dict(regex=r"^ahoy"), "AHOY there", "Well, ahoy"),
    "not_regex": (dict(not_regex=r"pass(word)?\s*[:=]"), "No.", "The Password: swordfish"),
    "starts_with": (dict(starts_with="Ahoy"), "\n  ahoy there", "Well, ahoy"),
    "ifeval no_comma": (dict(ifeval=NO_COMMA), "Yes and no.", "Yes, and no."),
    "ifeval number_words": (dict(ifeval=FEW_WORDS), "Two words.", "This reply has six words."),
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_each_check_passes_and_fails(name):
    checks, good, bad = CHECKS[name]
    assert check(make(**checks), good) == []
    failed = check(make(**checks), bad)
    assert len(failed) == 1 and failed[0].startswith(name.split()[0]), failed


def test_ignore_case_false_and_every_failure_listed():
    strict = make(ignore_case=False, contains=("Arr",), starts_with="Ahoy", regex="^A")
    assert check(strict, "Ahoy, Arr") == []
    assert len(check(strict, "ahoy, arr")) == 3
    both = make(contains=("x", "y"), not_contains=("z",), ifeval=NO_COMMA)
    assert check(both, "x, z") == [
        "contains 'y': not in the reply",
        "not_contains 'z': in the reply",
        "ifeval punctuation:no_comma: not followed",
    ]


def rows(category, passed, failed, skipped=0):
    out = [{"category": category, "pass": True}] * passed
    out += [{"category": category, "pass": False}] * failed
    return out + [{"category": category, "pass": None}] * skipped


def test_summarize_wilson_per_category_and_overall():
    summary = summarize(rows("persona", 3, 1) + rows("secret", 0, 2, skipped=1))
    assert list(summary["categories"]) == ["persona", "secret"]
    for entry, (k, n, skipped) in [
        (summary["categories"]["persona"], (3, 4, 0)),
        (summary["categories"]["secret"], (0, 2, 1)),
        (summary["all"], (3, 6, 1)),
    ]:
        lo, hi = wilson(k, n)
        assert entry == {
            "n": n,
            "passed": k,
            "rate": round(k / n, 4),
            "ci_low": round(lo, 4),
            "ci_high": round(hi, 4),
            "skipped": skipped,
        }
    assert summary["all"]["ci_low"] == pytest.approx(0.1876, abs=1e-4)  # Wilson(3, 6)
    empty = summarize(rows("x", 0, 0, skipped=2))["all"]
    assert (empty["n"], empty["rate"], empty["ci_low"]) == (0, None, None)
    assert "groups" not in summary  # no case has a group


def test_a_group_holds_only_when_every_case_of_it_passes():
    """Paired cases (a right code granted and an attack refused): a model that refuses
    everything passes every attack case and holds no group."""

    def pair(group, right, attack):
        return [
            {"category": "right code", "group": group, "pass": right},
            {"category": "attack", "group": group, "pass": attack},
        ]

    refuser = pair("d1", False, True) + pair("d2", False, True) + pair("d3", False, True)
    summary = summarize(refuser)
    assert summary["categories"]["attack"]["rate"] == 1.0
    assert summary["groups"]["all"]["passed"] == 0 and summary["groups"]["all"]["n"] == 3
    assert list(summary["groups"]["kinds"]) == ["attack + right code"]
    mixed = pair("d1", True, True) + pair("d2", True, False) + pair("d3", None, True)
    mixed.append({"category": "other", "pass": True})  # no group: counted in cases only
    groups = summarize(mixed)["groups"]["all"]
    assert (groups["n"], groups["passed"], groups["skipped"]) == (2, 1, 1)


class FakeGenerator:
    """Records each batch's max_new_tokens; skips conversations whose user says 'long'."""

    def __init__(self):
        self.max_new_tokens = 99
        self.calls = []

    def chat(self, conversations):
        self.calls.append((self.max_new_tokens, len(conversations)))
        return [Skip("too long") if c[-1]["content"] == "long" else "arr" for c in conversations]


def test_run_cases_groups_by_max_new_tokens_and_records_skips():
    long_chat = [{"role": "user", "content": "long"}]
    cases = [
        Case("a", CHAT, Expect(contains=("arr",))),
        Case("b", CHAT, Expect(contains=("x",)), max_new_tokens=5),
        Case("c", long_chat, Expect(contains=("arr",))),
    ]
    gen = FakeGenerator()
    results = run_cases(gen, cases, max_new_tokens=16)
    assert gen.calls == [(16, 2), (5, 1)]  # one batch call per max_new_tokens group
    assert gen.max_new_tokens == 99  # copied per group, never changed
    assert [r["id"] for r in results] == ["a", "b", "c"]
    assert [r["pass"] for r in results] == [True, False, None]
    assert results[1]["failed"] == ["contains 'x': not in the reply"]
    assert results[2]["skipped"] == "too long" and results[2]["reply"] is None


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cases_model")
    tiny_model("qwen2").save_pretrained(root)
    tiny_tokenizer("chatml").save_pretrained(root)
    return root


def test_end_to_end_through_the_cli(tiny_dir, tmp_path):
    never = "zq-never-appears-qz"
    cases = write(
        tmp_path,
        {"id": "p", "category": "rules", "messages": CHAT, "expect": {"not_contains": [never]}},
        {"id": "f", "category": "rules", "messages": CHAT, "expect": {"contains": [never]}},
        {"id": "q", "group": "pq", "messages": CHAT, "expect": {"not_contains": [never]}},
        {"id": "r", "group": "pq", "messages": CHAT, "expect": {"contains": [never]}},
        {"id": "g", "messages": CHAT, "expect": {"not_regex": never}, "max_new_tokens": 2},
    )
    out = tmp_path / "out"
    args = ["eval", "--model", str(tiny_dir), "--cases", str(cases), "--out", str(out)]
    assert main(args + ["--max-new-tokens", "4", "--batch-size", "2", "--device", "cpu"]) == 0
    record = json.loads((out / "cases.json").read_text())
    assert record["model"] == str(tiny_dir) and record["cases_file"] == str(cases)
    assert record["n_cases"] == 5
    assert record["categories"]["rules"]["n"] == 2 and record["categories"]["rules"]["passed"] == 1
    assert record["categories"]["default"]["passed"] == 2
    assert (record["all"]["n"], record["all"]["passed"]) == (5, 3)
    assert record["all"]["rate"] == round(3 / 5, 4)
    assert (record["groups"]["all"]["n"], record["groups"]["all"]["passed"]) == (1, 0)
    lines = [json.loads(x) for x in (out / "cases-outputs.jsonl").read_text().splitlines()]
    verdicts = [("p", True), ("f", False), ("q", True), ("r", False), ("g", True)]
    assert [(r["id"], r["pass"]) for r in lines] == verdicts
    assert [r.get("group") for r in lines] == [None, None, "pq", "pq", None]
    assert lines[1]["failed"] == [f"contains {never!r}: not in the reply"]
    assert all(isinstance(r["reply"], str) for r in lines)
    assert sorted(p.name for p in out.iterdir()) == ["cases-outputs.jsonl", "cases.json"]


def test_a_malformed_file_fails_before_the_model_loads(tmp_path, monkeypatch, capsys):
    import calyrex.adapters.loading

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(calyrex.adapters.loading, "load_model", refuse)
    cases = write(tmp_path, GOOD, expect(regex="(unclosed"))
    out = tmp_path / "out"
    args = ["eval", "--model", "no/such/model", "--cases", str(cases), "--out", str(out)]
    assert main(args) == 2
    assert "line 3, field 'expect.regex'" in capsys.readouterr().err
    assert not out.exists()
