"""Programmatic checkers: does a response obey a rule? (IFEval's strict verdict.)

One function per rule kind, registered in :data:`CHECKERS`. Every checker fails an empty
response: saying nothing obeys no rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .rules import REFUSAL, Rule
from .tasks import Task


def _capitals(rule: Rule, r: str, task: Task) -> bool:
    return r == r.upper()  # no lowercase letter (digits alone pass, as "19" is not lowercase)


def _start_with(rule: Rule, r: str, task: Task) -> bool:
    return r.strip().lower().startswith(rule.param.lower())


def _end_with(rule: Rule, r: str, task: Task) -> bool:
    words = r.split()
    return bool(words) and words[-1].strip(".!").lower() == rule.param.lower()


def _never_say(rule: Rule, r: str, task: Task) -> bool:
    return re.search(rf"\b{re.escape(rule.param)}\b", r, flags=re.IGNORECASE) is None


def _max_words(rule: Rule, r: str, task: Task) -> bool:
    return len(r.split()) <= int(rule.param)


def _commas(rule: Rule, r: str, task: Task) -> bool:
    return all(w.endswith(",") for w in r.split()[:-1])


def _brackets(rule: Rule, r: str, task: Task) -> bool:
    s = r.strip()
    return s.startswith("[") and s.endswith("]")


def _json(rule: Rule, r: str, task: Task) -> bool:
    try:
        value = json.loads(r.strip())
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and "answer" in value


def _refuse_topic(rule: Rule, r: str, task: Task) -> bool:
    refused = REFUSAL.lower().rstrip(".") in r.lower()
    return refused == (task.topic == rule.param)  # refuse on the topic, answer off it


CHECKERS: dict[str, Callable[[Rule, str, Task], bool]] = {
    "capitals": _capitals,
    "start_with": _start_with,
    "end_with": _end_with,
    "never_say": _never_say,
    "max_words": _max_words,
    "commas": _commas,
    "brackets": _brackets,
    "json": _json,
    "refuse_topic": _refuse_topic,
}


def check(rule: Rule, response: str, task: Task) -> bool:
    """True when ``response`` (to ``task``) obeys ``rule``."""
    return bool(response.strip()) and CHECKERS[rule.kind](rule, response, task)


def check_all(rules: list[Rule], response: str, task: Task) -> list[bool]:
    return [check(rule, response, task) for rule in rules]
