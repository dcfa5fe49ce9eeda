"""Per-item scores (``calyrex.eval.items``), the items every interval and paired difference of
the study resamples: a suite's own scorer applied to one unit at a time (the items scored
together), skipped replies left out, the column's metric only, an undefined unit left out, a
judged suite without any; lm-eval's logged documents one score each. A suite written here is
put in place of the registry's."""

import json

import pytest

from calyrex.eval import runner
from calyrex.eval.bench import Benchmark
from calyrex.eval.items import harness_items, item_scores

ITEMS = [
    {"id": "a:1", "unit": "a"},
    {"id": "a:2", "unit": "a"},
    {"id": "b:1", "unit": "b"},
    {"id": "c:1", "unit": "c"},
]


class Pairs(Benchmark):
    """Units of one or two items; ``yes`` is the share of a unit's replies that say "yes"
    (undefined for unit c), ``count`` the replies it was given."""

    name = "pairs"

    def load(self, data, ctx):
        return list(ITEMS)

    def unit(self, item):
        return item["unit"]

    def score(self, items, rows, ctx):
        said = [r["response"] == "yes" for r in rows]
        undefined = items[0]["unit"] == "c"
        yes = None if undefined else sum(said) / len(said)
        return {"metrics": {"count": float(len(rows)), "yes": yes}}


class Judged(Pairs):
    name = "judged"
    needs_judge = True


@pytest.fixture
def evaluated(tmp_path, monkeypatch):
    suites = {"pairs": Pairs, "judged": Judged}
    monkeypatch.setattr(runner, "make_benchmark", lambda name: suites[name]())
    rows = [
        {"id": "a:1", "response": "yes"},
        {"id": "a:2", "response": "no"},
        {"id": "b:1", "response": "yes", "skipped": "too long"},  # not run: no score
        {"id": "c:1", "response": "yes"},
    ]
    (tmp_path / "run.json").write_text(json.dumps({"config": {}}))
    for suite in suites:
        lines = "".join(json.dumps(r) + "\n" for r in rows)
        (tmp_path / f"{suite}.responses.jsonl").write_text(lines)
    return tmp_path


def test_a_units_score_is_its_items_scored_together_by_the_suite(evaluated):
    assert item_scores("pairs", evaluated, ["yes"]) == {"a": ("yes", 0.5)}  # b skipped, c undefined
    assert item_scores("pairs", evaluated, ["count"]) == {"a": ("count", 2.0), "c": ("count", 1.0)}


def test_a_judged_suite_keeps_no_per_item_scores(evaluated):
    assert item_scores("judged", evaluated, ["yes"]) is None


def test_lm_evals_documents_are_one_score_each_per_task(tmp_path):
    samples = tmp_path / "arc.samples.jsonl"
    rows = [
        {"task": "arc_easy", "doc_id": 0, "acc": 1.0, "acc_norm": 0.0},
        {"task": "arc_easy", "doc_id": 1, "acc": 0.0, "acc_norm": 1.0},
        {"task": "arc_challenge", "doc_id": 0, "acc": 1.0, "acc_norm": 1.0},
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert harness_items(samples, ["acc"]) == {
        "arc_easy:0": ("all", 1.0),
        "arc_easy:1": ("all", 0.0),
        "arc_challenge:0": ("all", 1.0),
    }
