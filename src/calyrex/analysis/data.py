"""Rule conversations for the analysis: a system prompt carrying a checkable rule, a neutral one.

Each :class:`RuleExample` is one user turn answered by a response that follows the rule. The
analysis runs it twice — under the rule and under the neutral system prompt — with the same
response, so any difference at the response positions comes from the system prompt alone.

The built-in set (8 rules × 16 questions) needs nothing but this file; ``ruleworld`` draws
them from RuleWorld (the default for its backbone); ``--data`` may instead name a JSONL file or
a ``datasets`` source with the same five fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core import plugins

FIELDS = ("rule_id", "system", "neutral_system", "user", "response")


@dataclass(frozen=True)
class RuleExample:
    rule_id: str  # which rule the system prompt carries (the probe's label)
    system: str  # the system prompt with the rule
    neutral_system: str  # a system prompt without any rule
    user: str
    response: str  # an assistant response that follows the rule

    def conversation(self, neutral: bool = False) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.neutral_system if neutral else self.system},
            {"role": "user", "content": self.user},
            {"role": "assistant", "content": self.response},
        ]

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Rule:
    system: str
    apply: Callable[[str, str], str]  # (full answer, short answer) → the rule-following response
    check: Callable[[str], bool]  # does a response follow the rule?


def _json_answer(response: str) -> bool:
    try:
        return set(json.loads(response)) == {"answer"}
    except (json.JSONDecodeError, TypeError):
        return False


RULES: dict[str, Rule] = {
    "capitals": Rule(
        "Always answer in capital letters.", lambda a, s: a.upper(), lambda r: r == r.upper()
    ),
    "lowercase": Rule(
        "Write your whole answer in lowercase letters only.",
        lambda a, s: a.lower(),
        lambda r: r == r.lower(),
    ),
    "prefix": Rule(
        "Begin every answer with the word 'Certainly:'.",
        lambda a, s: f"Certainly: {a}",
        lambda r: r.startswith("Certainly:"),
    ),
    "suffix": Rule(
        "End every answer with the words 'Over and out.'",
        lambda a, s: f"{a} Over and out.",
        lambda r: r.endswith("Over and out."),
    ),
    "brackets": Rule(
        "Wrap your entire answer in square brackets.",
        lambda a, s: f"[{a}]",
        lambda r: r.startswith("[") and r.endswith("]"),
    ),
    "json": Rule(
        'Reply only with JSON of the form {"answer": "..."}.',
        lambda a, s: json.dumps({"answer": a}),
        _json_answer,
    ),
    "brief": Rule("Answer in at most three words.", lambda a, s: s, lambda r: len(r.split()) <= 3),
    "exclaim": Rule(
        "End every sentence with an exclamation mark.",
        lambda a, s: a[:-1] + "!",
        lambda r: r.endswith("!"),
    ),
}

NEUTRAL_SYSTEMS = (
    "You are a helpful assistant.",
    "You are a friendly and knowledgeable assistant.",
    "You are an assistant that answers questions.",
    "You are a helpful AI model.",
)

# (question, full answer, answer in at most three words)
QUESTIONS = (
    ("What is the capital of France?", "The capital of France is Paris.", "Paris."),
    ("How many legs does a spider have?", "A spider has eight legs.", "Eight legs."),
    ("What colour is the sky on a clear day?", "The sky is blue on a clear day.", "Blue."),
    (
        "Which planet is closest to the sun?",
        "Mercury is the planet closest to the sun.",
        "Mercury.",
    ),
    ("What do bees make?", "Bees make honey from nectar.", "Honey."),
    ("What is frozen water called?", "Frozen water is called ice.", "Ice."),
    ("How many days are in a week?", "There are seven days in a week.", "Seven days."),
    ("What gas do plants take in?", "Plants take in carbon dioxide.", "Carbon dioxide."),
    ("Who wrote Hamlet?", "Hamlet was written by William Shakespeare.", "William Shakespeare."),
    ("What is the largest ocean?", "The Pacific is the largest ocean.", "The Pacific."),
    ("What animal says moo?", "A cow says moo.", "A cow."),
    ("What is the opposite of hot?", "The opposite of hot is cold.", "Cold."),
    ("What do you write on a blackboard with?", "You write on a blackboard with chalk.", "Chalk."),
    ("Which season comes after winter?", "Spring comes after winter.", "Spring."),
    (
        "At what temperature does water boil?",
        "Water boils at one hundred degrees Celsius.",
        "One hundred degrees.",
    ),
    ("What shape has three sides?", "A triangle has three sides.", "A triangle."),
)


def builtin_examples() -> list[RuleExample]:
    """The offline default: every rule on every question, rules interleaved (stratified order)."""
    out = []
    for q, (user, answer, short) in enumerate(QUESTIONS):
        for rule_id, rule in RULES.items():
            out.append(
                RuleExample(
                    rule_id,
                    rule.system,
                    NEUTRAL_SYSTEMS[q % len(NEUTRAL_SYSTEMS)],
                    user,
                    rule.apply(answer, short),
                )
            )
    return out


def _from_rows(rows: list[dict[str, Any]], where: str) -> list[RuleExample]:
    out = []
    for i, row in enumerate(rows, 1):
        missing = [f for f in FIELDS if not isinstance(row.get(f), str) or not row[f]]
        if missing:
            raise ValueError(f"{where}, row {i}: missing or empty fields {missing} (need {FIELDS})")
        out.append(RuleExample(*(row[f] for f in FIELDS)))
    if not out:
        raise ValueError(f"{where}: no rule conversations")
    return out


def read_jsonl(path: str | Path) -> list[RuleExample]:
    """Rule conversations from a JSONL file, one object with the five fields per line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such data file")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n}: not valid JSON ({err})") from err
    return _from_rows(rows, str(path))


def load_examples(data: str | None = None, split: str = "train") -> list[RuleExample]:
    """``None``/``"builtin"``: the built-in set; ``"NAME[:SEED]"``: a set a package declares (an
    entry point of ``calyrex_analysis_data``: ``ruleworld``, RuleWorld's); a ``.jsonl``
    path; else a ``datasets`` source with the five fields."""
    if data in (None, "builtin"):
        return builtin_examples()
    sources = plugins.table(plugins.ANALYSIS_DATA)  # "ruleworld": RuleWorld's, and others'
    if data.split(":")[0] in sources:
        return plugins.load(sources[data.split(":")[0]])(int(data.partition(":")[2] or 0))
    if data.endswith((".jsonl", ".json")) or Path(data).is_file():
        return read_jsonl(data)
    from datasets import load_dataset

    return _from_rows(list(load_dataset(data, split=split)), data)


def write_jsonl(examples: list[RuleExample], path: str | Path) -> None:
    Path(path).write_text("".join(json.dumps(e.to_dict()) + "\n" for e in examples))
