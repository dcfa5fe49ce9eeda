"""Conversations of the world, as OpenAI ``messages`` lists (and JSONL files of them).

- ``general_corpus``: the backbone's pretraining data. Tasks under ordinary, non-binding system
  prompts (a persona, or a note of information); format requests come from the *user*, stated
  or shown by examples, and the assistant follows the latest one — like a base model with no
  instruction hierarchy. No system prompt ever imposes a rule here.
- ``sft_corpus``: general rule-following conversations for adapter training. The system prompt
  imposes rules (single kinds and the *train* combinations), 1–4 turns obey them, some turns
  carry harmless long text, a quarter are the password game played fairly (the password, a
  wrong one said the same ways, or an unrelated request). No attack of any kind.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

from .lexicon import TOPICS
from .rules import ORDER, Rule, apply_rules, combinations
from .tasks import Task, list_task, say_task
from .world import NEUTRAL_SYSTEMS, Messages, World, reply

NOTES = ("secret word", "code word", "password", "magic word")
# task kinds of the general data, weighted towards the skills the rest builds on (copying first)
# the password game's share of the SFT corpus, and how a player says a word (the evaluation's
# rightful user also says "WORD please", a phrasing kept out of training)
ACCESS_SHARE = 0.25
ACCESS_PHRASES = ("{}", "{}", "The password is '{}'.", "Password: {}", "I say {}.")
GENERAL_KINDS = ("copy",) * 5 + ("count", "lookup", "arithmetic") * 2 + ("reverse", "sort")


def _neutral(rng: random.Random) -> list[dict[str, str]]:
    return (
        [{"role": "system", "content": rng.choice(NEUTRAL_SYSTEMS)}] if rng.random() < 0.7 else []
    )


def _user_rules(world: World, rng: random.Random) -> list[Rule]:
    """One or two compatible format requests (any combination: the user is not the system)."""
    kinds = [(k,) for k in ORDER] + combinations(2)
    return world.rules(rng, rng.choice(kinds))


DRILL_WORDS = sorted({w for topic in TOPICS.values() for w in topic})


def _drill(rng: random.Random) -> Task:
    """Copy or reverse 3-8 words drawn across all topics: no topic to guess, only the prompt
    to read — the drill that makes a small backbone learn to copy within the CPU budget."""
    items = rng.sample(DRILL_WORDS, rng.randint(3, 8))
    return list_task(rng, rng.choice(("copy", "copy", "reverse")), items, "none")


def _instructed_turn(world: World, rng: random.Random) -> tuple[str, str]:
    """A drill (12%), a plain task (48%), or a task with format requests in the user's own
    words (40%)."""
    if rng.random() < 0.12:
        task = _drill(rng)
        return task.prompt, task.answer
    if rng.random() < 0.55:
        task = world.task(rng, GENERAL_KINDS)
        return task.prompt, task.answer
    rules = _user_rules(world, rng)
    task = world.active_task(rng, rules)
    asks = " ".join(r.user_text() for r in rules)
    prompt = f"{asks} {task.prompt}" if rng.random() < 0.5 else f"{task.prompt} {asks}"
    return prompt, apply_rules(rules, task)


def _few_shot(world: World, rng: random.Random) -> tuple[str, str]:
    """Examples in the user turn show a format without naming it; the answer follows them."""
    rules = world.rules(rng, (rng.choice(ORDER),)) if rng.random() < 0.8 else []
    shots = [world.active_task(rng, rules) for _ in range(rng.randint(1, 8))]
    task = world.active_task(rng, rules)
    lines = [f"User: {t.prompt}\nAssistant: {apply_rules(rules, t)}" for t in shots]
    return "Examples:\n" + "\n".join(lines) + f"\n\n{task.prompt}", apply_rules(rules, task)


def _note(world: World, rng: random.Random) -> Messages:
    """Information in a system note, asked for by the user; or a phrase to say."""
    if rng.random() < 0.3:
        task = say_task(rng.choice(("ACCESS GRANTED", "ACCESS DENIED", "hello", "goodbye")))
        return _neutral(rng) + _turn(task.prompt, task.answer)
    name = rng.choice(NOTES)
    value = rng.choice(world.lexicon.passwords + list(world.lexicon.cities))
    system = f"{rng.choice(NEUTRAL_SYSTEMS)} Note: the {name} is '{value}'."
    asks = (f"What is the {name}?", f"Tell me the {name}.", f"Say the {name}.")
    return [{"role": "system", "content": system}] + _turn(rng.choice(asks), value)


def _turn(user: str, assistant: str) -> Messages:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": reply(assistant)}]


def general_conversation(world: World, rng: random.Random) -> Messages:
    """One pretraining conversation (see the module docstring)."""
    r = rng.random()
    if r < 0.08:
        return _note(world, rng)
    if r < 0.18:
        return _neutral(rng) + _turn(*_few_shot(world, rng))
    if r < 0.24:
        prompt, answer = _instructed_turn(world, rng)
        text = world.filler(rng, rng.randint(10, 60))
        return _neutral(rng) + _turn(f"Read this text.\n{text}\n\n{prompt}", answer)
    out = _neutral(rng)
    for _ in range(1 if r < 0.45 else rng.randint(2, 6)):
        out += _turn(*_instructed_turn(world, rng))
    return out


def _access_conversation(world: World, rng: random.Random) -> Messages:
    """The password game played fairly: the password opens; a wrong password, said the same
    ways, or an unrelated message does not (40 / 40 / 20: telling the right word from a wrong one
    is the skill, so the two come in equal numbers)."""
    password, wrong = rng.sample(world.lexicon.passwords, 2)
    said = rng.choice(ACCESS_PHRASES)
    r = rng.random()
    if r < 0.4:
        user, answer = said.format(password), "ACCESS GRANTED"
    elif r < 0.8:
        user, answer = said.format(wrong), "ACCESS DENIED"
    else:
        user, answer = world.task(rng).prompt, "ACCESS DENIED"
    return [{"role": "system", "content": world.access_prompt(password)}] + _turn(user, answer)


def sft_conversation(world: World, rng: random.Random) -> Messages:
    """One rule-following conversation (see the module docstring)."""
    if rng.random() < ACCESS_SHARE:
        return _access_conversation(world, rng)
    if rng.random() < 0.1:
        task: Task = world.task(rng)
        return _neutral(rng) + _turn(task.prompt, task.answer)
    rules = world.rules(rng, rng.choice(world.train_combos))
    out = [{"role": "system", "content": world.system_prompt(rules, rng)}]
    for _ in range(rng.choice((1, 1, 2, 3, 4))):
        task = world.active_task(rng, rules)
        prompt = task.prompt
        if rng.random() < 0.15:
            prompt = f"Read this text.\n{world.filler(rng, rng.randint(10, 120))}\n\n{prompt}"
        out += _turn(prompt, apply_rules(rules, task))
    return out


def general_corpus(world: World, n: int, stream: str = "general") -> Iterator[Messages]:
    rng = world.rng(stream)
    return (general_conversation(world, rng) for _ in range(n))


def sft_corpus(world: World, n: int, stream: str = "sft") -> Iterator[Messages]:
    rng = world.rng(stream)
    return (sft_conversation(world, rng) for _ in range(n))


def write_rows(rows: Iterable[dict], path: str | Path) -> int:
    """Write one JSON object per line; returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
            count += 1
    return count


def write_jsonl(conversations: Iterator[Messages], path: str | Path) -> int:
    """Write ``{"messages": [...]}`` lines; returns the number written."""
    return write_rows(({"messages": messages} for messages in conversations), path)
