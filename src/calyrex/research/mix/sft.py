"""The system-prompt SFT mix (issue 27, item 1): four kinds of examples from real public data,
every one with its instruction, persona, rule or defence in the system turn.

* ``instruction``: dolly-15k with the instruction in the system turn and its context as the
  user's data, dolly questions under a persona that fits their category, and GPTeacher
  role-play with the role in the system turn and the task in the user turn (role-play records
  with an input are injection tasks instead);
* ``rule``: a verifiable rule (:mod:`calyrex.research.mix.rules`) in the system turn, alone or after a
  persona; the reference reply is the real dolly reply transformed to obey it;
* ``injection``: StruQ / SecAlign injected data (:mod:`calyrex.research.mix.injection`);
* ``access``: Tensor Trust access-code dialogues (:mod:`calyrex.research.mix.access`).

Dolly items are routed to the kinds by position in a seeded shuffle, independently of the
counts (of the items with context, two in three are injection tasks), so no item is the task
of two kinds (the injected instructions are drawn from all short dolly questions) and the injection and access streams of a seed are the same
for every ``n`` (the preference mix of a seed pairs up exactly the SFT mix's injections, then
more). Every example fits ``max_chars`` and overlaps no benchmark (:mod:`calyrex.research.mix.leaks`).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .access import access_examples
from .example import Example, admissible
from .injection import injectable, injection_examples
from .leaks import leak_index
from .rules import RULES, SENTENCE_END
from .sources import Instruction, attack_sentences, dolly, gpteacher_roleplay

SFT_SHARES = {"instruction": 0.3, "rule": 0.3, "injection": 0.2, "access": 0.2}
PERSONAS = {  # dolly category → system prompts that describe the kind of answer it holds
    "open_qa": (
        "You are a knowledgeable assistant. Answer factual questions accurately and concisely.",
        "You answer general-knowledge questions with short, correct answers.",
    ),
    "general_qa": (
        "You are a thoughtful assistant who gives clear, well-reasoned explanations.",
        "Explain things plainly and give your reasons.",
    ),
    "classification": (
        "You sort and label things. Give the classification directly and keep it short.",
        "You are a careful classifier: assign each item to the right group.",
    ),
    "brainstorming": (
        "You are a creative brainstorming partner. Offer several distinct ideas.",
        "Help the user generate ideas: list varied, practical suggestions.",
    ),
    "creative_writing": (
        "You are an imaginative writer. Respond with original, vivid prose.",
        "You write creative pieces on request, with a clear voice and concrete detail.",
    ),
}
DEFAULT_PERSONAS = ("You are a helpful assistant.", "You are a concise, accurate assistant.")
ROLE = re.compile(
    r"(?:imagine|you are|you're|pretend|take on|take the role|assume|role ?play|play the|act as)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class MixConfig:
    """A mix's recipe: its size, seed, shares per kind and the longest example it keeps."""

    n: int = 4000
    seed: int = 0
    shares: dict[str, float] = field(default_factory=lambda: dict(SFT_SHARES))
    max_chars: int = 1000  # system + user + reply characters: ~256 SmolLM2 tokens
    rule_persona_share: float = 0.5  # rule rows whose system turn starts with a persona
    access: str = "default"  # the access dialogues' outcome rotation (mix.access.ROTATIONS)
    val: int = 0  # examples held out as the validation split (same shares, no shared group)
    balance_grants: bool = False  # preference only: right-code pairs repeated (preference.py)


@dataclass(frozen=True)
class DollyPools:
    context: list[Instruction]  # instruction rows: instruction (system) + context (user)
    questions: list[Instruction]  # instruction rows: persona (system) + question (user)
    rules: list[Instruction]  # rule rows
    tasks: list[Instruction]  # injection rows: the task whose data is injected
    injected: list[Instruction]  # the instructions injected into them


def counts(n: int, shares: dict[str, float]) -> dict[str, int]:
    """``n`` split by ``shares`` (largest remainder, so the counts sum to ``n``)."""
    total = sum(shares.values())
    exact = {k: n * v / total for k, v in shares.items()}
    out = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: out[k] - exact[k])[: n - sum(out.values())]:
        out[k] += 1
    return out


def dolly_pools(root: Path, seed: int) -> DollyPools:
    """Dolly's training items routed by position in a seeded shuffle (module docstring)."""
    records = list(dolly(root))
    random.Random(f"{seed}:dolly").shuffle(records)
    with_context = [r for r in records if r.context]
    without = [r for r in records if not r.context]
    return DollyPools(
        context=with_context[2::3],
        questions=without[::3],
        rules=[r for i, r in enumerate(without) if i % 3],
        tasks=[r for i, r in enumerate(with_context) if i % 3 != 2],
        injected=[r for r in without if injectable(r)],
    )


def _turns(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _persona(record: Instruction, rng: random.Random) -> str:
    return rng.choice(PERSONAS.get(record.category, DEFAULT_PERSONAS))


def roleplay_split(record: Instruction) -> tuple[str, str] | None:
    """(role, task) of a GPTeacher instruction whose first sentence casts the assistant."""
    sentences = SENTENCE_END.split(record.instruction)
    if len(sentences) < 2 or not ROLE.match(sentences[0]):
        return None
    task = " ".join(sentences[1:])
    return sentences[0], f"{task}\n\n{record.context}" if record.context else task


def _context_rows(pools: DollyPools) -> Iterator[Example]:
    for r in pools.context:
        yield Example(
            _turns(r.instruction, r.context), r.response, r.source, "instruction", r.category
        )


def _question_rows(pools: DollyPools, rng: random.Random) -> Iterator[Example]:
    for r in pools.questions:
        prompt = _turns(_persona(r, rng), r.instruction)
        yield Example(prompt, r.response, r.source, "instruction", r.category)


def _roleplay_rows(root: Path, seed: int) -> Iterator[Example]:
    records = [r for r in gpteacher_roleplay(root) if not r.context]  # the rest: injection tasks
    random.Random(f"{seed}:roleplay").shuffle(records)
    for r in records:
        if split := roleplay_split(r):
            yield Example(_turns(*split), r.response, r.source, "instruction", "roleplay")


def instruction_examples(root: Path, config: MixConfig) -> Iterator[Example]:
    """Dolly with context, dolly questions under a persona and role-play, in turn."""
    pools, rng = dolly_pools(root, config.seed), random.Random(f"{config.seed}:persona")
    streams = [_context_rows(pools), _question_rows(pools, rng), _roleplay_rows(root, config.seed)]
    while streams:
        for stream in list(streams):
            ex = next(stream, None)
            if ex is None:
                streams.remove(stream)
            else:
                yield ex


def rule_examples(root: Path, config: MixConfig) -> Iterator[Example]:
    """Each rule-pool item under the next rule (in a seeded rotation) that applies to its reply."""
    rng = random.Random(f"{config.seed}:rules")
    rotation = list(RULES.values())
    rng.shuffle(rotation)
    for r in dolly_pools(root, config.seed).rules:
        rule = next((rule for rule in rotation if rule.applies(r.response)), None)
        if rule is None:
            continue
        rotation.remove(rule)
        rotation.append(rule)
        system = rng.choice(rule.prompts)
        if rng.random() < config.rule_persona_share:
            system = f"{_persona(r, rng)} {system}"
        prompt = _turns(system, r.instruction)
        yield Example(prompt, rule.transform(r.response), r.source, "rule", rule.name)


def injection_stream(root: Path, config: MixConfig) -> Iterator[Example]:
    """Dolly tasks with context and GPTeacher tasks with input, their data injected."""
    pools = dolly_pools(root, config.seed)
    tasks = pools.tasks + [r for r in gpteacher_roleplay(root) if r.context]
    random.Random(f"{config.seed}:tasks").shuffle(tasks)
    sentences = attack_sentences(root, "train")
    return injection_examples(tasks, pools.injected, sentences, config.seed)


def access_stream(root: Path, config: MixConfig) -> Iterator[Example]:
    return access_examples(root, config.seed, config.max_chars, config.access)


# kind → its stream of candidate examples, one line each
KINDS: dict[str, Callable[[Path, MixConfig], Iterator[Example]]] = {
    "instruction": instruction_examples,
    "rule": rule_examples,
    "injection": injection_stream,
    "access": access_stream,
}


def held_out(example: Example, share: float, seed: int) -> bool:
    """Whether ``example``'s group falls in the validation split: a seeded hash of its group key
    below ``share``, so a defence's outcomes (or one prompt's examples) never straddle it."""
    digest = hashlib.sha256(f"{seed}:{example.group_key()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def take(
    kind: str, count: int, root: Path, config: MixConfig, held: int = 0
) -> tuple[list[Example], list[Example]]:
    """The first ``count`` admissible examples of ``kind``, and ``held`` more from groups none of
    them shares (the validation split); an error when the stream runs out first. ``held=0``:
    the first ``count``, exactly as without a split."""
    stream = admissible(KINDS[kind](root, config), leak_index(root), config.max_chars)
    train: list[Example] = []
    val: list[Example] = []
    share = held / (count + held) if held else 0.0
    for ex in stream:
        part, size = (val, held) if held_out(ex, share, config.seed) else (train, count)
        if len(part) < size:
            part.append(ex)
        if len(train) == count and len(val) == held:
            return train, val
    raise ValueError(
        f"only {len(train)} + {len(val)} held-out {kind} examples fit max_chars="
        f"{config.max_chars} without overlapping a benchmark; {count} + {held} were asked for"
    )


def build_split(root: Path, config: MixConfig) -> dict[str, list[Example]]:
    """Every kind's share of ``config.n`` (``train``) and of ``config.val`` (``validation``),
    each shuffled together with the seed."""
    parts: dict[str, list[Example]] = {"train": [], "validation": []}
    held = counts(config.val, config.shares)
    for kind, count in counts(config.n, config.shares).items():
        train, val = take(kind, count, root, config, held[kind])
        parts["train"] += train
        parts["validation"] += val
    for name, examples in parts.items():
        random.Random(f"{config.seed}:order" + ("" if name == "train" else f":{name}")).shuffle(
            examples
        )
    return parts


def build_examples(root: Path, config: MixConfig) -> list[Example]:
    """The training split of :func:`build_split`."""
    return build_split(root, config)["train"]


def build_sft(root: Path, config: MixConfig | None = None) -> list[dict[str, Any]]:
    """The SFT mix's rows (OpenAI messages with ``source``, ``kind`` and ``tag``)."""
    return [ex.sft_row() for ex in build_examples(root, config or MixConfig())]
