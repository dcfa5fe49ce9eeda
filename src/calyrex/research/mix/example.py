"""One training example of a mix, and the two row formats it is written in.

* SFT: OpenAI messages, ``{"messages": [system, user, assistant], "source", "kind", "tag"}``,
  read unchanged by :func:`calyrex.training.data.load_conversations`;
* preference: TRL's conversational preference format (``trl.data_utils.is_conversational``,
  ``DPOTrainer``), ``{"prompt": [system, user], "chosen": [assistant], "rejected": [assistant],
  "source", "kind", "tag"}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .leaks import LeakIndex


@dataclass(frozen=True)
class Example:
    prompt: list[dict[str, str]]  # the system and user turns
    reply: str  # the reference (SFT) and preferred (DPO) reply
    source: str  # the data set it comes from
    kind: str  # instruction | rule | injection | access
    tag: str  # the rule, injection style, access outcome or source category
    rejected: str | None = None  # the dispreferred reply, where the kind has one
    group: str = ""  # examples sharing it go to the same split (a defence); "": its own prompt

    def group_key(self) -> str:
        """What a validation split keeps whole: ``group``, else the prompt's text."""
        return self.group or "\n".join(m["content"] for m in self.prompt)

    def chars(self) -> int:
        """Characters of the prompt and the longer of the two replies."""
        replies = (self.reply, self.rejected or "")
        return sum(len(m["content"]) for m in self.prompt) + max(map(len, replies))

    def sft_row(self) -> dict[str, Any]:
        messages = [*self.prompt, {"role": "assistant", "content": self.reply}]
        return {"messages": messages, "source": self.source, "kind": self.kind, "tag": self.tag}

    def preference_row(self) -> dict[str, Any]:
        if self.rejected is None:
            raise ValueError(f"a {self.kind} example has no rejected reply")
        return {
            "prompt": list(self.prompt),
            "chosen": [{"role": "assistant", "content": self.reply}],
            "rejected": [{"role": "assistant", "content": self.rejected}],
            "source": self.source,
            "kind": self.kind,
            "tag": self.tag,
        }


def admissible(examples: Iterable[Example], index: LeakIndex, max_chars: int) -> Iterator[Example]:
    """The examples that fit ``max_chars`` and whose system and user turns overlap no benchmark;
    consecutive examples of one ``group`` (a defence's outcomes) are kept or dropped together."""
    group: list[Example] = []

    def whole() -> Iterator[Example]:
        ok = all(
            ex.chars() <= max_chars and not any(index.hits(m["content"]) for m in ex.prompt)
            for ex in group
        )
        return iter(group if ok else [])

    for ex in examples:
        if group and (not ex.group or ex.group != group[0].group):
            yield from whole()
            group = []
        group.append(ex)
    yield from whole()
