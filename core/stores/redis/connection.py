"""Redis plumbing shared by every Redis adapter (state, lexical index, rate limiter): the
client, the server named in messages without its password, and client errors mapped to
StoreError. The adapters keep only their commands and scripts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from core.ports import StoreError


def redact_url(url: str) -> str:
    """The URL without password or query (which may carry one), for messages and logs."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class RedisConnection:
    """A client on one Redis server; `errors()` maps what the client raises."""

    def __init__(
        self,
        url: str,
        *,
        role: str = "",
        decode_responses: bool = True,
        socket_timeout: float = 30.0,
        client: Any = None,
    ) -> None:
        """`role` names the user in messages ("lexical index"); `client`: an open client to
        use instead of connecting to `url`, e.g. a fakeredis one in tests (closed by close())."""
        self.url = redact_url(url)
        self.where = f"{role} in Redis at {self.url}" if role else f"Redis at {self.url}"
        # from_url gives the client its own thread-safe connection pool (closed by close()).
        # Typed Any: redis-py annotates sync results as `Awaitable | value`, which no caller wants.
        self.client: Any = (
            client
            if client is not None
            else redis.Redis.from_url(
                url,
                decode_responses=decode_responses,
                socket_connect_timeout=5,
                socket_timeout=socket_timeout,
            )
        )

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Client errors as StoreError naming the server (never its password)."""
        try:
            yield
        except redis.RedisError as err:
            raise StoreError(f"{self.where}: {err}") from err

    def close(self) -> None:
        """Release the client's connections."""
        self.client.close()
