"""mkdocs hooks (mkdocs.yml ``hooks:``): keep ``--strict`` strict where it means something.

Docstrings are also the CLI's help text, so some hold plain-text patterns such as
``PATH[:SPLIT][#N]`` that Markdown reads as a reference link ``[:SPLIT][#N]``; mkdocs-autorefs
then warns that it cannot find the target ``#N``, which fails a strict build. Only such targets
are dropped: one that could name a Python object (``calyrex.core.wrap``) still fails the build, as do
broken page links and stale ``:::`` references, which other loggers report.
"""

from __future__ import annotations

import logging
import re

_UNRESOLVED = re.compile(r"Could not find cross-reference target '(?P<ref>[^']*)'")
_PYTHON_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class _NotAPythonPath(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        found = _UNRESOLVED.search(record.getMessage())
        return not found or bool(_PYTHON_PATH.match(found["ref"]))


def on_startup(command: str, dirty: bool) -> None:
    logging.getLogger("mkdocs.plugins.mkdocs_autorefs._internal.plugin").addFilter(
        _NotAPythonPath()
    )
