"""What a server enforces: one typed config, filled by ``calyrex serve``'s flags."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..span.policy import CLIENT_SYSTEM as CLIENT_SYSTEM  # the policy's choices, re-exported
from ..span.policy import DEVELOPER_ROLE as DEVELOPER_ROLE
from ..span.policy import LATER_SYSTEM as LATER_SYSTEM
from ..span.policy import check_settings

LIMITS = ("max_stop_chars", "max_body_bytes", "max_json_depth", "max_messages",
          "max_message_chars", "encode_workers")  # fmt: skip


@dataclass
class ServeConfig:
    model_name: str = "calyrex"  # the id of GET /v1/models; requests naming another get a 404
    max_concurrency: int = 8  # requests decoding together (rows of the decode batch)
    max_queue: int = 64  # admitted requests waiting for a row; more get a 429
    cache_bytes: int = 1 << 30  # system-prompt cache bound (LRU by bytes); 0 turns it off
    cache_salt: str = ""  # mixed into every cache key: no hit across salts
    system_prompt: str | None = None  # the operator's pinned system prompt (--system-prompt FILE)
    client_system: str = "reject"  # under a pinned prompt: reject or override client system text
    developer_role: str = "reject"  # reject | system (a leading one is the prompt) | user
    later_system: str = "reject"  # reject | user
    default_max_tokens: int = 512  # when the request names none (capped by the window)
    max_stop: int = 4  # OpenAI's limit on ``stop`` strings
    max_stop_chars: int = 256  # each stop string (checked against the reply at every token)
    shutdown_grace_s: float = 10.0  # in-flight requests get this long to finish on shutdown
    # every route but /health wants ``Authorization: Bearer <one of these>``; empty: no auth
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # never printed or logged
    # limits checked before any work (each a 4xx naming its flag)
    max_body_bytes: int = 8 << 20  # request body, counted while it is read (413 past it)
    max_json_depth: int = 64  # nesting of [ and { in the body
    max_messages: int = 2048  # OpenAI's own limit
    max_message_chars: int = 1 << 20  # characters of one message's content
    encode_workers: int = 4  # threads that render and tokenise requests (not the engine's)

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
