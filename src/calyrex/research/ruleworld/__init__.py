"""RuleWorld: a synthetic instruction-hierarchy world, its tokenizer, backbone and evaluation."""

from .checkers import CHECKERS, check, check_all
from .rules import ORDER, Rule, apply_rules
from .tasks import TASKS, Task, answer_correct
from .world import Example, World

__all__ = [
    "CHECKERS",
    "ORDER",
    "TASKS",
    "Example",
    "Rule",
    "Task",
    "World",
    "answer_correct",
    "apply_rules",
    "check",
    "check_all",
]
