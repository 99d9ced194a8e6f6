"""Who an MCP message acts for: the Face its transport gives it, for the message's tools.

The transport decides, once per message: over stdio the local default tenant (like the CLI) on
the runtime the server opened; over HTTP the tenant of the request's API key on the API's
runtime (api/mcp/http.py). The server's middleware (api/mcp/server.py) puts it in a context
variable while the message's tool or resource runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from api.services.jobs import StreamSlots
from core.access import LOCAL, Caller
from runtime import Runtime


@dataclass(frozen=True)
class Face:
    """Who a message acts for and on which runtime; `remote` when it came over the network
    (it may then not name paths on the server's disk). A call that waits takes a slot of
    `streams` for API key `key` (None: the local default tenant, no key)."""

    runtime: Runtime
    caller: Caller
    remote: bool
    streams: StreamSlots = field(default_factory=StreamSlots)
    key: str | None = None


class Access(Protocol):
    """What the MCP server's lifespan yields: the Face of each message."""

    def face(self, request: Any) -> Face:
        """The Face of a message carried by `request` (the transport's; None on stdio)."""
        ...


@dataclass(frozen=True)
class LocalAccess:
    """stdio: every message acts for the local default tenant on this runtime."""

    runtime: Runtime
    streams: StreamSlots = field(default_factory=StreamSlots)

    def face(self, request: Any) -> Face:
        return Face(self.runtime, LOCAL, remote=False, streams=self.streams)


_FACE: ContextVar[Face] = ContextVar("cogmill_mcp_face")


def current() -> Face:
    """The Face of the message being handled."""
    return _FACE.get()


@contextmanager
def acting_as(face: Face) -> Iterator[None]:
    """Handle messages (in this context) as `face`."""
    token = _FACE.set(face)
    try:
        yield
    finally:
        _FACE.reset(token)
