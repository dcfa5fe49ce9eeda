"""``python -m calyrex.eval.harness ARGS`` is ``lm_eval ARGS`` with ``--model calyrex`` available.

lm-eval discovers models only through its own registry, so this entry point imports
:mod:`calyrex.eval.lm` (which registers ``calyrex``) and then runs lm-eval's own CLI.
"""

from __future__ import annotations


def main() -> None:
    from . import lm  # noqa: F401  (registers the "calyrex" model)
    from .punkt import ensure_punkt_tab

    ensure_punkt_tab()  # IFEval's checkers, offline
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
