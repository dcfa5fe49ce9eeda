"""What a server enforces: one typed config, filled by ``calyrex serve``'s flags."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..span.policy import CLIENT_SYSTEM as CLIENT_SYSTEM  # the policy's choices, re-exported
from ..span.policy import DEVELOPER_ROLE as DEVELOPER_ROLE
from ..span.policy import LATER_SYSTEM as LATER_SYSTEM
from ..span.policy import check_settings

LIMITS = ("max_stop_chars", "max_body_bytes", "max_json_depth", "max_messages",
          "max_message_chars", "encode_workers")  # fmt: skip


# fields a ``calyrex serve`` flag does not set directly (the command fills them from its own)
NOT_A_FLAG = {"cli": False}


@dataclass
class ServeConfig:
    """What a server enforces; ``calyrex serve`` takes one flag per field (its ``--help``)."""

    model_name: str = field(default="calyrex", metadata=NOT_A_FLAG)
    """The id of GET /v1/models; requests naming another get a 404 (--served-model-name)."""
    max_concurrency: int = 8
    """Requests decoding together (the rows of the decode batch)."""
    max_queue: int = 64
    """Admitted requests waiting for a row; more get a 429."""
    cache_bytes: int = 1 << 30
    """Bound of the system-prompt cache (LRU by bytes); 0 turns it off."""
    cache_salt: str = ""
    """Mixed into every cache key: no hit across salts (one per tenant)."""
    system_prompt: str | None = field(default=None, metadata=NOT_A_FLAG)
    """The operator's pinned system prompt (--system-prompt FILE)."""
    client_system: str = field(default="reject", metadata={"choices": CLIENT_SYSTEM})
    """Under a pinned prompt, a client's system message: rejected (400) or overridden."""
    developer_role: str = field(default="reject", metadata={"choices": DEVELOPER_ROLE})
    """A developer message: rejected, the system prompt (a leading one) or user text."""
    later_system: str = field(default="reject", metadata={"choices": LATER_SYSTEM})
    """A system message after the first turn: rejected or user text (never span)."""
    default_max_tokens: int = 512
    """Reply tokens when the request names none (capped by the context window)."""
    max_stop: int = 4
    """``stop`` strings a request may give (OpenAI's limit)."""
    max_stop_chars: int = 256
    """Characters of each stop string (checked against the reply at every token)."""
    shutdown_grace_s: float = field(default=10.0, metadata=NOT_A_FLAG)
    """Seconds in-flight requests get to finish on shutdown (--shutdown-grace)."""
    api_keys: tuple[str, ...] = field(default=(), repr=False, metadata=NOT_A_FLAG)
    """Every route but /health wants ``Authorization: Bearer <one of these>``; empty: no
    auth. Never printed or logged (--api-key)."""
    max_body_bytes: int = 8 << 20
    """Request body, counted while it is read (413 past it); checked before any work."""
    max_json_depth: int = 64
    """Nesting of [ and { in a request body."""
    max_messages: int = 2048
    """Messages in one request (OpenAI's own limit)."""
    max_message_chars: int = 1 << 20
    """Characters of one message's content."""
    encode_workers: int = 4
    """Threads that render and tokenise requests (not the engine's)."""

    def __post_init__(self) -> None:
        check_settings(self)  # client_system, developer_role, later_system (calyrex.span.policy)
        if self.max_concurrency < 1 or self.max_queue < 0 or self.cache_bytes < 0:
            raise ValueError(
                "max_concurrency must be ≥ 1, max_queue and cache_bytes ≥ 0, got "
                f"{self.max_concurrency}, {self.max_queue}, {self.cache_bytes}"
            )
        for name in LIMITS:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        self.api_keys = tuple(self.api_keys)
        if not all(isinstance(k, str) and k.strip() for k in self.api_keys):
            raise ValueError("api_keys must be non-empty strings")
