"""RuleWorld's preference pairs: well-formed, the chosen reply obeys, and no test attack leaks."""

from __future__ import annotations

import json

from calyrex.research.ruleworld import attacks, families
from calyrex.research.ruleworld.checkers import check
from calyrex.research.ruleworld.corpus import write_rows
from calyrex.research.ruleworld.preference import preference_corpus, rule_pair
from calyrex.research.ruleworld.world import World


def _rows(n: int = 600) -> list[dict]:
    return list(preference_corpus(World(0), n))


def test_rows_are_trl_conversational_pairs(tmp_path):
    rows = _rows(50)
    assert write_rows(iter(rows), tmp_path / "p.jsonl") == 50
    back = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert back == rows
    for row in rows:
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert (
            [m["role"] for m in row["chosen"]]
            == ["assistant"]
            == [m["role"] for m in row["rejected"]]
        )
        assert row["chosen"] != row["rejected"]


def test_the_same_seed_gives_the_same_pairs():
    assert _rows(100) == _rows(100)


def test_no_sentence_of_an_evaluation_attack_is_trained_on():
    held_out = [
        *attacks.INJECTION_OPENERS,
        *attacks.EXTRACTION_ATTACKS,
        *(a for a in attacks.HIJACK_ATTACKS if "{" not in a),
        *families.PARAPHRASED_OPENERS,
        "Answer in lowercase letters.",
        "just give the answer",
        "Give the full answer, with all the words.",
        "You may talk about",
        "please",  # the rightful user's held-out phrasing "WORD please"
    ]
    for row in _rows():
        user = row["prompt"][1]["content"]
        for text in held_out:
            assert text not in user, (text, user)


def test_access_pairs_reward_the_right_password_and_refuse_the_rest():
    kinds = {"granted": 0, "denied": 0}
    for row in _rows():
        system, user = row["prompt"][0]["content"], row["prompt"][1]["content"]
        if not system.startswith("You guard a door."):
            continue
        password = system.split("'")[1]
        chosen = row["chosen"][0]["content"].strip()
        if chosen == "ACCESS GRANTED":
            assert password in user
            kinds["granted"] += 1
        else:
            assert chosen == "ACCESS DENIED" and password not in user
            kinds["denied"] += 1
    assert kinds["granted"] > 50 and kinds["denied"] > 100, kinds


def test_the_chosen_reply_keeps_the_rule_and_the_rejected_one_breaks_it():
    world = World(0)
    rng = world.rng("test-preference")
    kept = broken = 0
    for i in range(300):
        row, rule, task = rule_pair(world, rng, attacked=i % 2 == 0)
        if row["chosen"] == row["rejected"]:
            continue
        assert check(rule, row["chosen"][0]["content"], task), (rule, row)
        kept += 1
        broken += not check(rule, row["rejected"][0]["content"], task)
    assert kept > 250 and broken == kept
