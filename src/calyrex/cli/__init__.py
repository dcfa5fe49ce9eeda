"""The ``calyrex`` command: a thin table of subcommands over library functions.

A subcommand is a function marked ``@options_from(SomeOptions, ...)``: its flags are the fields
of those typed dataclasses (``--max-steps`` ↔ ``max_steps``; help from each field's docstring,
choices from ``Literal`` or a registry: :mod:`calyrex.cli.fields`), and it receives the flags
given as keyword arguments (``**options``). A positional-only parameter is a positional
argument (``calyrex study real``); a parameter named like a field receives that field's flag
(so Python callers may pass it positionally); any other parameter is a flag of its own, its
help from the docstring's ``Args:`` block (``train --config``, ``bench --quick``, ``serve``'s
binding). Adding a subcommand is a function plus one line in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any

from .fields import (
    add_options_of,
    description,
    flag_fields,
    flag_keywords,
    help_text,
    options_of,
    param_docs,
    summary,
)

# subcommand → "module:function" (imported only when that subcommand runs, so the CLI starts fast);
# the research wing's subcommands (study, mix, reproduce, ruleworld-*, …) are its entry points
# (group calyrex_commands in pyproject.toml): commands()
COMMANDS: dict[str, str] = {
    "placements": "calyrex.cli.command:placements",
    "inspect": "calyrex.cli.command:inspect_adapter",
    "analyze": "calyrex.analysis.command:analyze",
    "eval": "calyrex.eval.command:eval_command",
    "report": "calyrex.eval.command:report_command",
    "train": "calyrex.training.command:train_command",
    "bench": "calyrex.bench.command:bench",
    "chat": "calyrex.cli.chat:chat",
    "serve": "calyrex.serve.command:serve",
    "export-vllm": "calyrex.vllm.export:export_vllm_command",
}


def _hint(fn: Callable[..., Any], annotation: Any) -> Any:
    """A parameter's annotation as a type (annotations are postponed strings)."""
    if isinstance(annotation, str):
        return eval(annotation, {**vars(typing), **inspect.unwrap(fn).__globals__})
    return annotation


def _add(sub: Any, name: str, fn: Callable[..., Any]) -> argparse.ArgumentParser:
    doc = description(fn)
    line = summary(fn).replace("%", "%%") or None  # argparse %-formats a help string
    parser = sub.add_parser(name, help=line, description=doc.replace("``", "`"))
    fields = {f.name for config in options_of(fn) or () for f in flag_fields(config)}
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and (p.kind is inspect.Parameter.POSITIONAL_ONLY or p.name not in fields)
    ]  # the function's own options; a parameter named like a field takes that field's flag
    docs = param_docs(fn)  # the docstring's Args: block, as the flags' help
    for param in params:
        # type, nargs, choices: as a config field's
        kw = flag_keywords(_hint(fn, param.annotation), param.default)
        what = help_text(docs.get(param.name, ""), param.default) or None
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            parser.add_argument(param.name, help=what, **kw)
            continue
        flag = "--" + param.name.replace("_", "-")
        if param.default is inspect.Parameter.empty:
            parser.add_argument(flag, required=True, help=what, **kw)
        else:
            parser.add_argument(flag, default=param.default, help=what, **kw)
    add_options_of(parser, fn, taken=[p.name for p in params])  # **options: one flag per field
    parser.set_defaults(_fn=fn)
    return parser


def commands() -> dict[str, str]:
    """Every subcommand: the library's :data:`COMMANDS`, then those packages declare."""
    from ..core import plugins

    return {**COMMANDS, **plugins.table(plugins.COMMANDS)}


def subcommand_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``calyrex NAME`` alone: its flags, its ``--help``."""
    from ..core.plugins import load

    sub = argparse.ArgumentParser(prog="calyrex").add_subparsers()
    return _add(sub, name, load(commands()[name]))


def _groups(table: dict[str, str]) -> str:
    """The subcommands by wing, for ``calyrex --help``: the library's own, then the research
    wing's (entry points: the studies, mixes and RuleWorld that reproduce the paper)."""
    library = [n for n in table if n in COMMANDS]
    research = [n for n in table if n not in COMMANDS]
    lines = ["library:  " + ", ".join(library)]
    lines += ["research: " + ", ".join(research)] if research else []
    return "\n".join([*lines, "", "calyrex COMMAND --help: what a command does and every flag."])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ..core.plugins import load

    table = commands()
    parser = argparse.ArgumentParser(
        prog="calyrex",
        description="CALYREX: system-prompt cross-attention adapters",
        epilog=_groups(table),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = argv[0] if argv and argv[0] in table else None
    for name, target in table.items():
        if wanted in (None, name):
            _add(sub, name, load(target))
        else:
            sub.add_parser(name)
    args = vars(parser.parse_args(argv))
    fn = args.pop("_fn")
    args.pop("command")
    positional = [
        args.pop(p.name)
        for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.POSITIONAL_ONLY
    ]
    try:
        result = fn(*positional, **args)
    except (ValueError, FileNotFoundError) as err:
        print(f"calyrex {wanted}: error: {err}", file=sys.stderr)
        return 2
    return int(result) if isinstance(result, int) else 0
