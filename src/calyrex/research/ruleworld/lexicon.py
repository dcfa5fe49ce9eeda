"""The words of RuleWorld: topic word lists, synthetic names and a fixed fact table.

Everything a task, rule or attack says is drawn from here, so the tokenizer can be trained on
a closed vocabulary and the backbone stays small. The synthetic names and the fact table are
drawn from ``seed``: two worlds with the same seed are identical.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# topic -> words; every list task draws its items from one topic (refusal rules name topics)
TOPICS: dict[str, tuple[str, ...]] = {
    "animals": (
        "cat",
        "dog",
        "fox",
        "owl",
        "bear",
        "wolf",
        "frog",
        "goat",
        "lion",
        "mouse",
        "horse",
        "tiger",
    ),
    "fruits": (
        "apple",
        "pear",
        "plum",
        "fig",
        "lemon",
        "mango",
        "grape",
        "peach",
        "melon",
        "cherry",
        "kiwi",
        "lime",
    ),
    "colors": (
        "red",
        "blue",
        "green",
        "black",
        "white",
        "pink",
        "gray",
        "brown",
        "gold",
        "silver",
        "purple",
        "orange",
    ),
    "tools": (
        "hammer",
        "saw",
        "drill",
        "rope",
        "nail",
        "brush",
        "knife",
        "ladder",
        "spade",
        "wrench",
        "shovel",
        "axe",
    ),
    "places": (
        "river",
        "forest",
        "castle",
        "market",
        "harbor",
        "bridge",
        "garden",
        "tower",
        "valley",
        "island",
        "desert",
        "village",
    ),
    "music": (
        "drum",
        "flute",
        "piano",
        "violin",
        "harp",
        "guitar",
        "song",
        "choir",
        "trumpet",
        "bell",
        "banjo",
        "cello",
    ),
}
FILLER_WORDS = (
    "the",
    "a",
    "in",
    "on",
    "near",
    "old",
    "small",
    "big",
    "quiet",
    "bright",
    "cold",
    "warm",
    "walks",
    "sees",
    "finds",
    "keeps",
    "likes",
    "sits",
    "and",
    "with",
    "under",
    "over",
    "every",
    "day",
)
PREFIXES = ("Sure:", "Okay:", "Answer:", "Note:", "Result:", "Well:")
END_WORDS = ("done", "over", "thanks", "goodbye", "finished", "amen")
ATTRIBUTES = ("color", "pet", "city", "age")
_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ren",
    "tu",
    "zor",
    "bel",
    "an",
    "dri",
    "vek",
    "sa",
    "mo",
    "lin",
    "ta",
    "qui",
    "pel",
)


@dataclass
class Lexicon:
    """Synthetic people, cities and passwords, and the fact table about the people."""

    people: list[str]
    cities: list[str]
    passwords: list[str]
    facts: dict[str, dict[str, str]] = field(default_factory=dict)  # person -> attribute -> value

    def all_words(self) -> list[str]:
        words = [w for ws in TOPICS.values() for w in ws] + list(FILLER_WORDS)
        return words + self.people + self.cities + self.passwords + list(END_WORDS)


def _name(rng: random.Random, taken: set[str], syllables: int) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(syllables)).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def build_lexicon(
    seed: int, n_people: int = 24, n_cities: int = 12, n_passwords: int = 24
) -> Lexicon:
    """The lexicon and fact table of the world with ``seed`` (deterministic)."""
    rng = random.Random(f"lexicon-{seed}")
    taken: set[str] = set()
    people = [_name(rng, taken, 2) for _ in range(n_people)]
    cities = [_name(rng, taken, 3) for _ in range(n_cities)]
    passwords = [_name(rng, taken, 3).lower() for _ in range(n_passwords)]
    facts = {
        p: {
            "color": rng.choice(TOPICS["colors"]),
            "pet": rng.choice(TOPICS["animals"]),
            "city": rng.choice(cities),
            "age": str(rng.randint(5, 90)),
        }
        for p in people
    }
    return Lexicon(people, cities, passwords, facts)
