"""RuleWorld's rule conversations for ``calyrex analyze --data ruleworld[:SEED]`` (declared as the
entry point ``ruleworld`` of the group ``calyrex_analysis_data``)."""

from __future__ import annotations

from ...analysis.data import RuleExample


def analysis_examples(seed: int = 0, per_rule: int = 16) -> list[RuleExample]:
    """RuleWorld's rule conversations: each rule kind alone, on a task where it shows.

    The system prompt states one rule (``calyrex.research.ruleworld``); the neutral one is a RuleWorld
    persona; the response is the task's answer reshaped to obey the rule. Deterministic in
    ``seed``, rules interleaved.
    """
    from . import ORDER, World, apply_rules
    from .world import NEUTRAL_SYSTEMS as PERSONAS

    world = World(seed)
    rng = world.rng("analysis")
    out = []
    for _ in range(per_rule):
        for kind in ORDER:
            rules = world.rules(rng, (kind,))
            task = world.active_task(rng, rules)
            system = rules[0].system_text()
            neutral = rng.choice(PERSONAS)
            out.append(RuleExample(kind, system, neutral, task.prompt, apply_rules(rules, task)))
    return out
