"""What every long-lived request of the API shares: job event streams and waiting MCP calls.

Both sleep on the event loop, read the state store on the few threads of one StreamSlots
(api/services/jobs.py), and count against the same caps per API key and per process
(`COGMILL_API_MAX_STREAMS_PER_KEY`, `COGMILL_API_MAX_STREAMS`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.requests import Request

from api.services.jobs import StreamSlots
from core.access import Caller


def stream_slots(app: Any) -> StreamSlots:
    """The app's open streams, made on the first one (on the event loop: no race)."""
    state = app.state
    if getattr(state, "event_streams", None) is None:
        state.event_streams = StreamSlots()
    slots: StreamSlots = state.event_streams
    return slots


def key_of(request: Request, caller: Caller) -> str | None:
    """Which API key a stream counts against (a digest of it); None without keys (auth off)."""
    if caller.tenant is None:
        return None
    _, _, key = request.headers.get("authorization", "").partition(" ")
    return hashlib.sha256(key.strip().encode()).hexdigest()
