"""Verifiable system-prompt rules: a sentence for the system turn (a few paraphrases), a
transform that makes a real reply obey it, and a checker that verifies a reply does.

The rule *kinds* follow IFEval (Zhou et al. 2023: change_case, punctuation:no_comma,
detectable_content:postscript, startend:end_checker / quotation, detectable_format:json_format /
number_bullet_lists, length_constraints:number_words); the wording, phrases and parameters are
our own, never IFEval's prompts. Every checker accepts its own transform's output and rejects
replies that plainly break the rule, and where IFEval has the same kind its official checker
accepts the transform's output too (all three property-tested on real dolly replies).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

WORD = re.compile(r"\w+")  # a word, as IFEval's length checker counts them
MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")  # a list item's bullet or number
# a sentence's end: . ! ? not after an initial ("J.K.") or a common abbreviation ("Dr.")
_NOT_ABBREVIATION = "".join(
    rf"(?<!\b{a})"
    for a in ("[A-Z]", "Mr", "Ms", "Dr", "St", "Jr", "Sr", "vs", "Mrs", "etc", "e.g", "i.e")
)
SENTENCE_END = re.compile(rf"{_NOT_ABBREVIATION}(?<=[.!?])\s+(?=\S)")
BOUNDARY = re.compile(rf"{_NOT_ABBREVIATION}[.!?](?=\s|$)|(?=\n)")


def _has_letters(reply: str) -> bool:
    return any(c.isalpha() for c in reply)


@dataclass(frozen=True)
class Rule:
    """One verifiable rule. ``applies(reply)``: the transform can make this reply obey it."""

    name: str
    prompts: tuple[str, ...]
    transform: Callable[[str], str]
    check: Callable[[str], bool]
    applies: Callable[[str], bool] = _has_letters


def count_words(text: str) -> int:
    return len(WORD.findall(text))


def items(reply: str) -> list[str]:
    """A reply as list items: its lines (bullets and numbers stripped), or its sentences."""
    lines = [MARKER.sub("", line).strip() for line in reply.splitlines()]
    lines = [line for line in lines if line]
    if len(lines) > 1:
        return lines
    return [s.strip() for s in SENTENCE_END.split(lines[0] if lines else "") if s.strip()]


def truncate_words(reply: str, limit: int) -> str:
    """The longest prefix of ``reply`` that ends a sentence or line and has ≤ ``limit`` words;
    when the first sentence alone is longer, its first words up to the limit and "…"."""
    best = ""
    for m in BOUNDARY.finditer(reply):
        prefix = reply[: m.end()].rstrip()
        if count_words(prefix) > limit:
            break
        if prefix and not prefix.endswith(":") and not MARKER.fullmatch(prefix.split("\n")[-1]):
            best = prefix
    if best:
        return best
    kept: list[str] = []
    for token in reply.split():
        if count_words(" ".join([*kept, token])) > limit:
            break
        kept.append(token)
    return " ".join(kept).rstrip(",;:") + "…"


def _no_commas(reply: str) -> str:
    reply = re.sub(r"(?<=\d),(?=\d{3})", "", reply)  # 1,000 → 1000
    return re.sub(r"[ \t]*[,，][ \t]*", " ", reply).strip()


def _json_answer(text: str) -> bool:
    try:
        value = json.loads(text.strip())
    except json.JSONDecodeError:
        return False
    return (
        isinstance(value, dict)
        and list(value) == ["answer"]
        and bool(value["answer"])
        and isinstance(value["answer"], str)
    )


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def postscript(note: str) -> Rule:
    """A postscript: a last paragraph that starts with "P.S." (IFEval's postscript kind)."""
    return Rule(
        "postscript",
        (
            f'End every reply with a postscript that starts with "P.S." and says: {note}',
            f'Always add a final paragraph beginning with "P.S." that reads: {note}',
            f'After your answer, add a "P.S." line with this note: {note}',
        ),
        lambda r: f"{r.rstrip()}\n\nP.S. {note}",
        lambda t: len(ps := _paragraphs(t)) > 1 and ps[-1].startswith("P.S. "),
        lambda r: _has_letters(r) and "P.S." not in r,
    )


def ending(phrase: str) -> Rule:
    """A fixed closing phrase after which nothing follows (IFEval's end_checker kind)."""
    return Rule(
        "ending_phrase",
        (
            f'Finish every response with the exact words "{phrase}" and nothing after them.',
            f'Your reply must end with this exact phrase: "{phrase}"',
            f'Close each answer with "{phrase}" as its very last words.',
        ),
        lambda r: f"{r.rstrip()}\n\n{phrase}",
        lambda t: t.rstrip().endswith(phrase) and len(t.strip()) > len(phrase),
        lambda r: _has_letters(r) and not r.rstrip().endswith(phrase),
    )


def max_words(limit: int) -> Rule:
    """At most ``limit`` words (IFEval's number_words "less than" kind)."""
    return Rule(
        f"max_{limit}_words",
        (
            f"Keep every reply to {limit} words or fewer.",
            f"Your answers must not exceed {limit} words.",
            f"Be brief: use at most {limit} words in a reply.",
        ),
        lambda r: truncate_words(r, limit),
        lambda t: 0 < count_words(t) <= limit,
        lambda r: count_words(r) > limit,
    )


def starts_with(word: str) -> Rule:
    """A fixed first word (language-free format rule)."""
    return Rule(
        "starts_with",
        (
            f'Begin every reply with the word "{word}".',
            f'The first word of each of your answers must be "{word}".',
            f'Always open your response with "{word}".',
        ),
        lambda r: f"{word}! {r.lstrip()}",
        lambda t: re.match(rf"{re.escape(word)}\b", t.lstrip()) is not None,
        lambda r: _has_letters(r) and not r.lstrip().startswith(word),
    )


def _lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines() if line.strip()]


def _bullets(text: str) -> bool:
    lines = _lines(text)
    return len(lines) > 1 and all(re.match(r"- \S", line) for line in lines)


def _numbered(text: str) -> bool:
    lines = _lines(text)
    return len(lines) > 1 and all(line.startswith(f"{i}. ") for i, line in enumerate(lines, 1))


def _listable(reply: str) -> bool:
    return len(items(reply)) > 1


ALL_CAPITALS = Rule(
    "all_capitals",
    (
        "Write your entire response in capital letters only.",
        "Every letter of your reply must be upper case.",
        "Answer using only CAPITAL LETTERS, with no lower-case letters at all.",
    ),
    str.upper,
    str.isupper,
    lambda r: any(c.islower() for c in r) and r.upper().isupper(),  # "ɾ" has no capital
)
ALL_LOWERCASE = Rule(
    "all_lowercase",
    (
        "Write your whole reply in lower-case letters; no capital letters anywhere.",
        "Use only lower case in your answers, even for names and the first word.",
        "Never use upper-case letters: everything you write is lower case.",
    ),
    str.lower,
    str.islower,
    lambda r: any(c.isupper() for c in r),
)
NO_COMMAS = Rule(
    "no_commas",
    (
        "Never use a comma in your replies.",
        "Your response must not contain a single comma.",
        "Write without commas: use other punctuation or rephrase instead.",
    ),
    _no_commas,
    lambda t: bool(t.strip()) and "," not in t and "，" not in t,
    lambda r: "," in r or "，" in r,
)
JSON_ANSWER = Rule(
    "json_answer",
    (
        'Reply only with a JSON object of the form {"answer": "<your reply>"} and nothing else.',
        'Wrap your whole answer in JSON: a single object with one key, "answer".',
        'Format every response as valid JSON, {"answer": ...}, with no text outside it.',
    ),
    lambda r: json.dumps({"answer": r}, ensure_ascii=False),
    _json_answer,
    lambda r: bool(r.strip()),
)
BULLETS = Rule(
    "bullet_points",
    (
        'Format your reply as a bulleted list: every line starts with "- ".',
        'Answer only in bullet points, one per line, each beginning with "- ".',
        'Write each point on its own line starting with a dash and a space ("- ").',
    ),
    lambda r: "\n".join(f"- {item}" for item in items(r)),
    _bullets,
    lambda r: _listable(r) and not _bullets(r),
)
NUMBERED = Rule(
    "numbered_lines",
    (
        'Write your reply as numbered lines: "1. ", "2. ", "3. " and so on, one point per line.',
        "Structure every answer as a numbered list starting at 1, one item per line.",
        'Number each line of your response, beginning with "1. ".',
    ),
    lambda r: "\n".join(f"{i}. {item}" for i, item in enumerate(items(r), 1)),
    _numbered,
    lambda r: _listable(r) and not _numbered(r),
)
QUOTED = Rule(
    "double_quotes",
    (
        "Put your entire response inside double quotation marks.",
        'Wrap the whole of every reply in a pair of double quotes ("...").',
        "Enclose your complete answer in double quotation marks, from first to last character.",
    ),
    lambda r: f'"{r.strip()}"',
    lambda t: len(s := t.strip()) > 2 and s[0] == s[-1] == '"',
    lambda r: _has_letters(r) and not r.strip().startswith('"'),
)

# name → rule, one line each; parameters chosen by us (IFEval's phrases are not reused)
RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        ALL_CAPITALS,
        ALL_LOWERCASE,
        NO_COMMAS,
        postscript("Feel free to ask a follow-up question."),
        ending("That covers the essentials."),
        JSON_ANSWER,
        max_words(30),
        max_words(60),
        BULLETS,
        NUMBERED,
        starts_with("Certainly"),
        QUOTED,
    )
}
