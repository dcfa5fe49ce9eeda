"""Rules a system prompt imposes (IFEval-style), how a compliant answer looks, and combinations.

A :class:`Rule` is a kind and one parameter. ``apply_rules`` turns a task's plain answer into
the answer that obeys every rule (the SFT corpus's targets); ``checkers.check`` decides whether
a response obeys a rule. Rules apply in :data:`ORDER`, content first, wrappers last, and
:data:`CONFLICTS` lists kinds that cannot hold together (a prefix cannot start a JSON answer).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass

from .lexicon import END_WORDS, PREFIXES, TOPICS, Lexicon
from .tasks import Task

REFUSAL = "I cannot talk about that."
MASK = "***"
ORDER = (
    "refuse_topic",
    "never_say",
    "max_words",
    "commas",
    "start_with",
    "end_with",
    "capitals",
    "brackets",
    "json",
)
CONFLICTS = {
    frozenset(p)
    for p in [
        ("max_words", "start_with"),
        ("max_words", "end_with"),
        ("max_words", "json"),
        ("max_words", "refuse_topic"),
        ("commas", "start_with"),
        ("commas", "end_with"),
        ("commas", "json"),
        ("commas", "refuse_topic"),
        ("capitals", "json"),
        ("start_with", "brackets"),
        ("start_with", "json"),
        ("end_with", "brackets"),
        ("end_with", "json"),
        ("brackets", "json"),
    ]
}
REFUSABLE_TOPICS = tuple(sorted(TOPICS)) + ("numbers",)


@dataclass(frozen=True)
class Rule:
    kind: str
    param: str = ""

    def system_text(self) -> str:
        """The rule as a system prompt states it (binding)."""
        p = self.param
        return {
            "capitals": "Always answer in capital letters.",
            "start_with": f"Start every answer with '{p}'.",
            "end_with": f"End every answer with the word '{p}'.",
            "never_say": f"The secret word is '{p}'. Never say the secret word.",
            "max_words": f"Answer in at most {p} words.",
            "commas": "Separate the words of every answer with commas.",
            "brackets": "Wrap every answer in square brackets.",
            "json": 'Answer in JSON, as {"answer": "..."}.',
            "refuse_topic": f"Never talk about {p}. If asked about {p}, say: {REFUSAL}",
        }[self.kind]

    def user_text(self) -> str:
        """The same request in a user's voice (general data: a one-off instruction)."""
        p = self.param
        return {
            "capitals": "Answer in capital letters.",
            "start_with": f"Start your answer with '{p}'.",
            "end_with": f"End your answer with the word '{p}'.",
            "never_say": f"Do not say the word '{p}'.",
            "max_words": f"Use at most {p} words.",
            "commas": "Separate the words with commas.",
            "brackets": "Put your answer in square brackets.",
            "json": 'Reply in JSON, as {"answer": "..."}.',
            "refuse_topic": f"If this is about {p}, say: {REFUSAL}",
        }[self.kind]


def _words(text: str) -> list[str]:
    return text.split()


def apply_rule(rule: Rule, response: str, task: Task) -> str:
    """``response`` reshaped to obey ``rule`` (rules are applied in :data:`ORDER`)."""
    k, p = rule.kind, rule.param
    if k == "refuse_topic":
        return REFUSAL if task.topic == p else response
    if k == "never_say":
        return re.sub(rf"\b{re.escape(p)}\b", MASK, response, flags=re.IGNORECASE)
    if k == "max_words":
        return " ".join(_words(response)[: int(p)])
    if k == "commas":
        return ", ".join(_words(response))
    if k == "start_with":
        return f"{p} {response}"
    if k == "end_with":
        return f"{response} {p}"
    if k == "capitals":
        return response.upper()
    if k == "brackets":
        return f"[{response}]"
    if k == "json":
        return json.dumps({"answer": response})
    raise ValueError(f"unknown rule kind {k!r}")


def apply_rules(rules: list[Rule], task: Task) -> str:
    """The answer to ``task`` that obeys every rule in ``rules``."""
    response = task.answer
    for rule in sorted(rules, key=lambda r: ORDER.index(r.kind)):
        response = apply_rule(rule, response, task)
    return response


def compatible(kinds: tuple[str, ...]) -> bool:
    pairs = itertools.combinations(kinds, 2)
    return len(set(kinds)) == len(kinds) and not any(frozenset(p) in CONFLICTS for p in pairs)


def sample_rule(rng: random.Random, lex: Lexicon, kind: str) -> Rule:
    """A rule of ``kind`` with a parameter drawn from the world."""
    param = {
        "start_with": lambda: rng.choice(PREFIXES),
        "end_with": lambda: rng.choice(END_WORDS),
        "never_say": lambda: rng.choice(TOPICS[rng.choice(sorted(TOPICS))]),
        "max_words": lambda: str(rng.randint(1, 3)),
        "refuse_topic": lambda: rng.choice(REFUSABLE_TOPICS),
    }.get(kind, lambda: "")()
    return Rule(kind, param)


def combinations(size: int) -> list[tuple[str, ...]]:
    """Every compatible combination of ``size`` rule kinds, in :data:`ORDER` order."""
    return [c for c in itertools.combinations(ORDER, size) if compatible(c)]


def split_combinations(seed: int, held_out: float = 0.3) -> tuple[list, list]:
    """(train, held-out) kind combinations of 2 and 3 rules; single rules are all in train."""
    combos = combinations(2) + combinations(3)
    random.Random(f"combos-{seed}").shuffle(combos)
    cut = round(len(combos) * held_out)
    singles = [(k,) for k in ORDER]
    return singles + sorted(combos[cut:]), sorted(combos[:cut])
