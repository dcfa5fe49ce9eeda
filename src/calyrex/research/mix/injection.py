"""Prompt-injected examples in the StruQ / SecAlign recipe (Chen et al. 2024, "StruQ"; Chen et
al. 2025, "SecAlign").

The system turn is a task's instruction, the user turn its data (a dolly ``context``) with an
injected instruction appended: another dolly item's instruction, alone (``naive``) or inside one
of StruQ's ``train`` ignore-attack sentences (``ignore``). The target is the reply to the
system's task; the injected item's own reply is what obeying the injection gives (SecAlign's
rejected reply). Only ``train`` sentences are used: the ``test`` ones are the benchmark's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from .example import Example
from .sources import Instruction

IGNORE_SHARE = 0.8  # the rest are naive injections (the bare instruction), as in StruQ
MAX_INJECTED_CHARS = 200  # an injected instruction is a short standalone request
MAX_INJECTED_REPLY_CHARS = 400


def injectable(record: Instruction) -> bool:
    """A standalone short request with a short reply (no context of its own)."""
    return (
        not record.context
        and len(record.instruction) <= MAX_INJECTED_CHARS
        and len(record.response) <= MAX_INJECTED_REPLY_CHARS
    )


def _inline(instruction: str) -> str:
    """Lower-case the first letter where the instruction continues a sentence ("What is X?" →
    "what is X?"), but not "I" or an acronym ("NASA")."""
    first = instruction.split()[0] if instruction.split() else ""
    if len(first) > 1 and first[1:].islower():
        return instruction[0].lower() + instruction[1:]
    return instruction


def inject(data: str, instruction: str, sentence: str | None, joiner: str) -> str:
    """``data`` with ``instruction`` appended, inside ``sentence`` when one is given."""
    attack = (
        sentence.replace("{injected_prompt}", _inline(instruction)) if sentence else instruction
    )
    return f"{data.rstrip()}{joiner}{attack}"


def injection_examples(
    tasks: Sequence[Instruction],
    injections: Sequence[Instruction],
    sentences: Sequence[str],
    seed: int,
) -> Iterator[Example]:
    """One injected example per task (with context), in order; seeded choices. Tag: the style
    (``ignore`` or ``naive``); reply: the task's; rejected: the injected item's."""
    rng = random.Random(f"{seed}:injection")
    for task in tasks:
        other = rng.choice(injections)
        while other.instruction == task.instruction:
            other = rng.choice(injections)
        ignore = rng.random() < IGNORE_SHARE
        sentence = rng.choice(sentences) if ignore else None
        user = inject(task.context, other.instruction, sentence, rng.choice((" ", "\n\n")))
        prompt = [
            {"role": "system", "content": task.instruction},
            {"role": "user", "content": user},
        ]
        style = "ignore" if ignore else "naive"
        yield Example(prompt, task.response, task.source, "injection", style, other.response)
