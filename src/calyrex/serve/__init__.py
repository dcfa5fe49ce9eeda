"""``calyrex serve``: an OpenAI-compatible server for a CALYREX model (extra ``calyrex[serve]``).

One file per concept: ``auth`` (API keys), ``body`` (the body and its limits), ``request``
(validation) and ``policy`` (the span policy), ``encoder`` (rendering and tokenisation off the
engine) over ``prompt`` (rendering through ``encode_chat``), ``prompt_cache`` (the system-prompt
cache), ``batch`` (left-padded decode batches), ``sampling``, ``engine`` (the scheduler thread),
``metrics``, ``reply`` (OpenAI's response shapes), ``app`` (FastAPI routes) and ``command`` (the
CLI). Importing this package loads no web stack.
"""

from .config import ServeConfig

__all__ = ["ServeConfig"]
