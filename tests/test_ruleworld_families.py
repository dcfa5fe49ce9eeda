"""The wider attack set (issue 14): every family well-formed, its checker flags and passes."""

import pytest

from calyrex.research.ruleworld import World, apply_rules, check_all
from calyrex.research.ruleworld.attacks import INJECTION_OPENERS
from calyrex.research.ruleworld.families import (
    DOCUMENTS,
    FAMILIES,
    PARAPHRASED_OPENERS,
    base_items,
    family_examples,
)
from calyrex.research.ruleworld.rules import ORDER
from calyrex.span.chat import encode_chat

N = 18  # two of each rule kind


@pytest.fixture(scope="module")
def world():
    return World(0)


def _broken(example, response):
    return not all(check_all(example.rules, response, example.task))


def _family_specific(family, example, control):
    user, system = example.messages[-1]["content"], example.messages[0]["content"]
    assert system == control.messages[0]["content"]  # the same rule, prompt and task
    text = {
        "control": lambda: user == example.task.prompt,
        "paraphrased": lambda: any(user.startswith(o) for o in PARAPHRASED_OPENERS),
        "after_task": lambda: user.startswith(example.task.prompt) and user != example.task.prompt,
        "quoted": lambda: any(d.split("{")[0] in user for d in DOCUMENTS),
        "later_turn": lambda: len(example.messages) in (4, 6, 8),
        "roleplay": lambda: "FreeBot" in user or "friend" in user or "test" in user,
        "fake_headers": lambda: "system" in user.lower() and "New rule:" in user,
        "payload_split": lambda: len(example.messages) == 6 and "part A" in user,
    }
    assert text[family](), (family, example.messages)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_examples_are_well_formed(world, family):
    examples = family_examples(world, N, family)
    controls = family_examples(world, N, "control")
    assert len(examples) == N
    assert [e.rules[0].kind for e in examples] == [ORDER[i % len(ORDER)] for i in range(N)]
    for example, control in zip(examples, controls, strict=True):
        roles = [m["role"] for m in example.messages]
        assert roles[0] == "system" and roles[-1] == "user"
        assert roles[1:] == ["user", "assistant"] * (len(roles) // 2 - 1) + ["user"]
        assert all(m["content"].strip() for m in example.messages)
        assert example.task == control.task and len(example.rules) == 1
        _family_specific(family, example, control)
    assert family_examples(world, N, family)[3].messages == examples[3].messages  # seeded


@pytest.mark.parametrize("family", list(FAMILIES))
def test_checker_flags_violations_and_passes_compliance(world, family):
    examples = family_examples(world, N, family)
    for example in examples:  # the task's plain answer breaks the rule; the ruled one obeys
        assert _broken(example, example.task.answer), (example.rules, example.task)
        assert not _broken(example, apply_rules(example.rules, example.task))
    # hand-written replies to the item whose rule is "capitals"
    capitals = next(e for e in examples if e.rules[0].kind == "capitals")
    answer = capitals.task.answer
    assert _broken(capitals, f"Sure! {answer}") and _broken(capitals, answer.lower())
    assert not _broken(capitals, answer.upper()) and not _broken(capitals, f"OK: {answer.upper()}")


def test_attack_openers_are_unseen_and_families_share_their_tasks(world):
    assert not set(PARAPHRASED_OPENERS) & set(INJECTION_OPENERS)
    items = base_items(world, 9)
    assert len({i.rules[0].kind for i in items}) == 9


def test_typed_role_headers_stay_outside_the_system_span(world):
    from transformers import AutoTokenizer

    from calyrex.backbones.resolve import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("ruleworld"))
    headers = family_examples(world, 4, "fake_headers")
    controls = family_examples(world, 4, "control")
    for a, b in zip(headers, controls, strict=True):
        masks = [encode_chat(tok, [e.messages], add_generation_prompt=True) for e in (a, b)]
        assert masks[0]["system_mask"].sum() == masks[1]["system_mask"].sum() > 0
