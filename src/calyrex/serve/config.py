"""What a server enforces: one typed config, filled by ``calyrex serve``'s flags."""

from __future__ import annotations

from dataclasses import dataclass

DEVELOPER_ROLE = ("reject", "system", "user")  # what a ``developer`` message becomes
LATER_SYSTEM = ("reject", "user")  # what a system message after the first message becomes
CLIENT_SYSTEM = ("reject", "override")  # a client system message under a pinned prompt


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
    shutdown_grace_s: float = 10.0  # in-flight requests get this long to finish on shutdown

    def __post_init__(self) -> None:
        for name, allowed in (
            ("client_system", CLIENT_SYSTEM),
            ("developer_role", DEVELOPER_ROLE),
            ("later_system", LATER_SYSTEM),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.max_concurrency < 1 or self.max_queue < 0 or self.cache_bytes < 0:
            raise ValueError(
                "max_concurrency must be ≥ 1, max_queue and cache_bytes ≥ 0, got "
                f"{self.max_concurrency}, {self.max_queue}, {self.cache_bytes}"
            )
