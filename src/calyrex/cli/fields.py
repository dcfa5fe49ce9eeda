"""A subcommand's options from typed dataclasses: one flag per field, defined once, in the config.

``@options_from(SomeConfig)`` on a subcommand's function adds ``--max-steps`` for the field
``max_steps``, and so on for every field; several dataclasses, as transformers'
``HfArgumentParser((ModelArguments, TrainingArguments))`` takes them, give one group of flags
each (``@options_from(EvalOptions, EvalConfig)``: the command's own options beside the library
config they fill). What the flag takes comes from the annotation (``int``, ``float``, ``str``,
``bool`` as ``--x/--no-x``, ``X | None``, ``list[X]`` (repeatable when its default is None),
``X | list[X]``, ``tuple[X, ...]``, ``Literal[...]``, ``dict`` as JSON); its help is the field's
docstring (the string literal under it, as mkdocstrings reads it) or, for a field without one,
HF's ``field(metadata={"help": ...})``; its choices are ``Literal`` values or
``field(metadata={"choices": REGISTRY})``; ``metadata={"cli": False}`` keeps a field off the
command line (the command sets it from its own options). A field with no default is a required
flag. The function receives only the flags given on the command line, as keyword arguments
(:func:`split_options` sorts them by dataclass), so a preset or a ``--config FILE`` can sit
between the dataclass defaults and the flags.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import json
import re
import textwrap
import typing
from collections.abc import Callable, Sequence
from pathlib import PurePath
from types import UnionType
from typing import Any, Literal, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def options_from(*configs: Any, required: bool = True) -> Callable[[F], F]:
    """Mark a subcommand whose ``**options`` are the fields of the dataclasses ``configs``.

    A config given as an instance (a preset) shows its values as the flags' defaults.
    ``required=False``: a field with no default is an optional flag all the same (the command
    fills it from elsewhere: ``calyrex train --config FILE.yaml``).
    """
    for config in configs:
        if not dataclasses.is_dataclass(config):
            raise TypeError(f"{config!r} is not a dataclass")

    def mark(fn: F) -> F:
        fn.__calyrex_options__ = configs  # type: ignore[attr-defined]
        fn.__calyrex_required__ = required  # type: ignore[attr-defined]
        return fn

    return mark


def options_of(fn: Callable[..., Any]) -> tuple[Any, ...] | None:
    """The dataclasses (or preset instances) ``fn`` takes its options from, if any."""
    return getattr(fn, "__calyrex_options__", None)


def flag_fields(config: Any) -> list[dataclasses.Field]:
    """The fields of ``config`` that are flags (not ``metadata={"cli": False}``)."""
    return [f for f in dataclasses.fields(config) if f.init and f.metadata.get("cli") is not False]


def split_options(options: dict[str, Any], *configs: Any) -> list[dict[str, Any]]:
    """``options`` sorted by dataclass, one dict per config (HF's ``parse_dict``, before the
    instances: the command decides what the flags go over, defaults or a preset)."""
    parts: list[dict[str, Any]] = [{} for _ in configs]
    owner = {f.name: i for i, c in reversed(list(enumerate(configs))) for f in flag_fields(c)}
    for key, value in options.items():
        if key not in owner:
            raise TypeError(f"unexpected option {key!r}")
        parts[owner[key]][key] = value
    return parts


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name → its docstring (the string right under the field), base classes first."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object has no fields
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):  # no source (built at run time, a zip app)
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, after in zip(body, body[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def param_docs(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter name → its text in the docstring's ``Args:`` block (Google style)."""
    lines = (inspect.getdoc(fn) or "").splitlines()
    docs: dict[str, str] = {}
    name = None
    for line in lines[lines.index("Args:") + 1 :] if "Args:" in lines else []:
        if not line.startswith(" "):  # a blank line or the next section ends the block
            break
        head, colon, text = line.strip().partition(":")
        head = head.split(" (")[0]  # "name (type): text"
        if len(line) - len(line.lstrip()) == 4 and colon and head.isidentifier():
            name, docs[head] = head, text.strip()
        elif name is not None:  # a continuation line, indented deeper
            docs[name] += " " + line.strip()
    return docs


# reStructuredText a docstring may hold, as a terminal should show it: ``--cases`` → --cases,
# :mod:`.heldout` → .heldout, :func:`~calyrex.eval.grant.granted` → granted
LITERAL = re.compile(r"``(.+?)``")
ROLE = re.compile(r":[a-z]+:`(~?)([^`]+?)`")


def plain(text: str) -> str:
    """``text`` without reStructuredText's literal quotes and cross-reference roles."""
    text = ROLE.sub(lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], text)
    return LITERAL.sub(r"\1", text)


def help_text(text: str, default: Any) -> str:
    """``text`` in plain words (:func:`plain`) with its default appended, escaped for
    argparse's %-formatting."""
    text = plain(text)
    shown = _shown(default)
    if shown is not None:
        text = f"{text} (default: {shown})" if text else f"default: {shown}"
    return text.replace("%", "%%")


def description(fn: Callable[..., Any]) -> str:
    """``fn``'s docstring without its ``Args:`` block (which becomes the flags' help)."""
    doc = inspect.getdoc(fn) or ""
    lines = doc.splitlines()
    return plain("\n".join(lines[: lines.index("Args:")]).rstrip() if "Args:" in lines else doc)


def summary(fn: Callable[..., Any]) -> str:
    """``fn``'s first sentence, whole, in one line (plain words: :func:`description`): its line
    in ``calyrex --help`` (a docstring's first *line* stops mid-sentence where the text wraps)."""
    first = description(fn).split("\n\n")[0]
    text = " ".join(first.split())
    end = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)[.!?](?=\s|$)", text)
    return text[: end.end()] if end else text


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _shown(value: Any) -> str | None:
    """How a default reads in help; None when there is nothing to show."""
    if value is None or value is dataclasses.MISSING or value is inspect.Parameter.empty:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return " ".join(map(str, value)) if value else "none (empty)"
    return str(value)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


class _Convert(argparse.Action):
    """Store ``convert(values)``: a tuple for ``tuple[...]``, one item for ``X | list[X]``."""

    def __init__(self, *args: Any, convert: Callable[[Any], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.convert = convert

    def __call__(
        self, parser: Any, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        setattr(namespace, self.dest, self.convert(values))


def _scalar(kind: Any) -> dict[str, Any]:
    """argparse's ``type`` (and ``choices``) for one value of annotation ``kind``."""
    if typing.get_origin(kind) is Literal:
        values = typing.get_args(kind)
        return {"type": type(values[0]), "choices": values}
    if kind is Any:
        return {"type": str}
    if typing.get_origin(kind) is dict or kind is dict:
        return {"type": _json_object, "metavar": "JSON"}
    if isinstance(kind, type) and issubclass(kind, str | int | float | PurePath):
        return {"type": kind}
    raise TypeError(f"no command-line form for {kind!r}")


def argument(kind: Any) -> dict[str, Any]:
    """``add_argument`` keywords for a field annotated ``kind``."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, UnionType):
        args = tuple(a for a in args if a is not type(None))  # X | None: None is the default
        if len(args) == 1:
            return argument(args[0])
        one = next((a for a in args if list[a] in args), None)
        if len(args) == 2 and one is not None:  # X | list[X]: one value stays a scalar
            convert = lambda v: v[0] if len(v) == 1 else v  # noqa: E731
            return {**_scalar(one), "nargs": "+", "action": _Convert, "convert": convert}
        raise TypeError(f"no command-line form for {kind!r}")
    if kind is bool:
        return {"action": argparse.BooleanOptionalAction}
    if origin is list:
        return {**_scalar(args[0]), "nargs": "+"}
    if origin is tuple:
        many = len(args) == 2 and args[1] is Ellipsis
        if not many and len(set(args)) != 1:
            raise TypeError(f"no command-line form for {kind!r} (mixed types)")
        nargs = "+" if many else len(args)
        return {**_scalar(args[0]), "nargs": nargs, "action": _Convert, "convert": tuple}
    return _scalar(kind)


def flag_keywords(kind: Any, default: Any) -> dict[str, Any]:
    """:func:`argument`'s keywords; a list whose default is None is repeatable
    (``--key a b --key c`` → ``[a, b, c]``)."""
    kw = argument(kind)
    if kw.get("nargs") == "+" and "action" not in kw and default is None:
        kw["action"] = "extend"
    return kw


def _class(config: Any) -> type:
    """A dataclass, or the class of a preset instance."""
    return config if isinstance(config, type) else type(config)


def field_help(config: Any, f: dataclasses.Field) -> str:
    """A field's help: its docstring, else HF's ``metadata={"help": ...}``."""
    return field_docs(_class(config)).get(f.name) or f.metadata.get("help", "")


def add_options(
    parser: argparse.ArgumentParser, config: Any, taken: Sequence[str] = (), required: bool = True
) -> None:
    """One flag per field of ``config`` (a dataclass, or an instance whose values are the
    defaults shown); a flag not given leaves its field out of the namespace."""
    cls = _class(config)
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(f"options ({cls.__name__} fields)")
    for f in flag_fields(cls):
        if f.name in taken:
            raise TypeError(f"{f.name!r} is both a parameter and a {cls.__name__} field")
        default = _default(f) if config is cls else getattr(config, f.name)
        kw = flag_keywords(hints[f.name], default)
        if "choices" in f.metadata:  # a registry: a dict's keys or a tuple of names
            kw["choices"] = list(f.metadata["choices"])
        kw.update({k: f.metadata[k] for k in ("nargs", "metavar") if k in f.metadata})
        if default is dataclasses.MISSING and required:
            kw["required"] = True
        flag = "--" + f.name.replace("_", "-")
        text = help_text(field_help(config, f), default)
        group.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, help=text, **kw)


def add_options_of(
    parser: argparse.ArgumentParser, fn: Callable[..., Any], taken: Sequence[str]
) -> None:
    """The flags of every dataclass ``fn`` is marked with (:func:`options_from`)."""
    for config in options_of(fn) or ():
        add_options(parser, config, taken, getattr(fn, "__calyrex_required__", True))
