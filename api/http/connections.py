"""Bounds on the connections `cogmill serve` holds open.

uvicorn bounds only the idle time between requests on a kept-open connection. A connection
that never sends a whole request head was held for ever, so an outsider holding as many silent
sockets as the process may open files stopped it: /health timed out and asyncio logged every
failed accept (320 sockets against a limit of 300: 225 MB of log in 45 s).
`guarded_protocol` gives uvicorn's HTTP protocol:
- a head deadline: a request line and headers must arrive within `head_timeout_s` of the
  connection opening (or of the first byte after a kept-open connection went idle), or the
  connection is answered 408 and closed (one that sent nothing is closed without an answer);
- a body deadline: a request whose body stops arriving for `body_idle_s` (while the app is
  ready for more) is closed;
- caps on open connections, in all and per client address (0: no cap per client): a
  connection over either is answered 503 `too_many_connections` and closed at once, so the
  process never runs out of descriptors and the connections already open are served.
Refusals are logged once a minute with their count, not once each.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections import Counter
from collections.abc import Callable

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("cogmill.api")

DESCRIPTORS_KEPT = 256  # for the stores, model files, driver pools and logs beside the sockets
REFUSALS_LOGGED_EVERY_S = 60.0


def closing_answer(status: int, reason: str, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer in the one error schema that closes the connection."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n"
        + ("retry-after: 1\r\n" if status == 503 else "")
        + "\r\n"
    )
    return head.encode() + body


TOO_MANY = closing_answer(
    503,
    "Service Unavailable",
    "too_many_connections",
    "the server holds as many connections as it may (in all, or from this address); "
    "close idle ones or retry later",
)
HEAD_TOO_SLOW = closing_answer(
    408,
    "Request Timeout",
    "request_timeout",
    "the request's head (request line and headers) did not arrive in time",
)


def connection_cap(wanted: int) -> int:
    """`wanted`, or fewer if the process may not open that many descriptors. The soft limit
    is raised toward the hard one first (as far as `wanted` needs)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + DESCRIPTORS_KEPT
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    cap = max(1, soft - DESCRIPTORS_KEPT)
    log.warning(
        "api_max_connections lowered from %d to %d: the process may open %d file "
        "descriptors (raise `ulimit -n`)",
        wanted,
        cap,
        soft,
    )
    return cap


def guarded_protocol(
    max_connections: int, per_client: int, head_timeout_s: float, body_idle_s: float
) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the bounds above; one class per server (it counts the
    server's connections by client address)."""
    by_client: Counter[str] = Counter()
    refusals = {"count": 0, "logged_at": float("-inf")}

    def refused() -> None:
        refusals["count"] += 1
        now = time.monotonic()
        if now - refusals["logged_at"] >= REFUSALS_LOGGED_EVERY_S:
            log.warning(
                "api_connections_refused count=%d open=%d max=%d per_client=%d",
                refusals["count"],
                sum(by_client.values()),
                max_connections,
                per_client,
            )
            refusals["count"], refusals["logged_at"] = 0, now

    class GuardedH11Protocol(H11Protocol):
        _address = ""
        _timer: asyncio.TimerHandle | None = None  # the head's deadline, or the body's idle
        _head_begun = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._address = self.client[0] if self.client else ""
            by_client[self._address] += 1
            over_client = per_client and by_client[self._address] > per_client
            if len(self.connections) > max_connections or over_client:
                refused()
                transport.write(TOO_MANY)
                transport.close()
                return
            self._arm(head_timeout_s, self._head_late)

        def connection_lost(self, exc: Exception | None) -> None:
            by_client[self._address] -= 1
            if not by_client[self._address]:
                del by_client[self._address]
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.transport.is_closing():
                return
            if self._timer is None and self.conn.their_state is h11.IDLE:
                self._arm(head_timeout_s, self._head_late)  # a request on an idle connection
            self._head_begun = True
            super().data_received(data)
            if self.conn.their_state is h11.SEND_BODY:
                self._arm(body_idle_s, self._body_late)  # each chunk restarts it
            elif self.conn.their_state is not h11.IDLE:
                self._disarm()  # the whole request is in

        def _arm(self, seconds: float, then: Callable[[], None]) -> None:
            self._disarm()
            self._timer = self.loop.call_later(seconds, then)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _head_late(self) -> None:
            self._timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                if self._head_begun:  # a connection that never sent a byte is just closed
                    self.transport.write(HEAD_TOO_SLOW)
                self.transport.close()

        def _body_late(self) -> None:
            self._timer = None
            if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
                return
            waiting = self.flow.read_paused or (self.cycle and self.cycle.waiting_for_100_continue)
            if waiting:  # for the app to take what came, or to ask for the body: not the client
                self._arm(body_idle_s, self._body_late)
            else:  # the app may be answering already: no answer of ours, the app sees it leave
                self.transport.close()

    return GuardedH11Protocol
