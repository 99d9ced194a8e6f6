"""Before a command uses them: is the state store, the broker and the result backend there?

The Redis clients retry a refused connection for seconds (the state store's client about 20 s
over a command's first few calls, Celery's result backend 25 s), which suits a worker riding
out a Redis restart but leaves a user at the command line waiting to learn that a URL is
wrong. One ping each, with short timeouts and no retries, says it at once: which server, by
its URL without the password, and which setting names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from core.ports import StoreError
from core.settings import Settings
from core.stores.redis.connection import redact_url

TIMEOUT_S = 1.5  # per server: three distinct ones that do not answer still fail within 5 s
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


@dataclass(frozen=True)
class Use:
    """A Redis server a command needs, for what and under which setting."""

    role: str
    setting: str
    url: str


def redis_uses(settings: Settings, *, queueing: bool) -> list[Use]:
    """The Redis servers of the settings: the state store, and the broker and the result
    backend when the command queues work for worker processes."""
    uses = []
    if settings.redis_url:
        uses.append(Use("the state store", "COGMILL_REDIS_URL", settings.redis_url))
    if queueing and not settings.embedded_broker:
        uses.append(Use("the broker", "COGMILL_BROKER_URL", settings.broker_url))
        uses.append(Use("the result backend", "COGMILL_RESULT_BACKEND", settings.result_backend))
    return [use for use in uses if use.url.startswith(REDIS_SCHEMES)]


def check_reachable(settings: Settings, *, queueing: bool) -> None:
    """Raise StoreError naming every Redis server of the settings that does not answer a ping
    (its URL without the password, its roles and their settings)."""
    by_url: dict[str, list[Use]] = {}
    for use in redis_uses(settings, queueing=queueing):
        by_url.setdefault(use.url, []).append(use)
    problems = []
    for url, uses in by_url.items():
        if (error := ping(url)) is not None:
            roles = "; ".join(f"{use.role}, {use.setting}" for use in uses)
            problems.append(
                f"cannot reach Redis at {redact_url(url)} ({roles}): {error.rstrip('.')}"
            )
    if problems:
        raise StoreError("; ".join(problems) + "; start it, or fix the setting")


def ping(url: str) -> str | None:
    """Why the Redis at `url` does not answer a ping within TIMEOUT_S, or None."""
    try:
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=TIMEOUT_S,
            socket_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )
        with client:
            client.ping()
    except (redis.RedisError, OSError, ValueError) as err:
        message = str(err) or type(err).__name__
        password = urlsplit(url).password
        return message.replace(password, "***") if password else message
    return None
