"""``calyrex serve``: an OpenAI-compatible server for a CALYREX model (extra ``calyrex[serve]``).

One file per concept: ``request`` (validation) and ``policy`` (the span policy), ``prompt``
(rendering through ``encode_chat``), ``prompt_cache`` (the system-prompt cache), ``batch``
(left-padded decode batches), ``sampling``, ``engine`` (the scheduler thread), ``metrics``,
``app`` (FastAPI routes) and ``command`` (the CLI). Importing this package loads no web stack.
"""

from .config import ServeConfig

__all__ = ["ServeConfig"]
