"""A webhook receiver for tests: a threaded HTTP server on 127.0.0.1 that records every POST
and answers a scripted sequence of statuses (then 200), plus the documented verification code."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = re.compile(r"<!-- webhook-verify -->\s*```python\n(.*?)```", re.S)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class WebhookReceiver:
    """Records POSTs; answers `statuses` in order (a status per POST), 200 after them."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.received: list[Received] = []
        self.statuses = list(statuses or [])
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, dict(self.headers.items()), body, time.time())
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 60.0) -> list[Received]:
        """The POSTs once at least `count` arrived; AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.received)} of {count} webhook POSTs in {timeout}s")


def readme_verify() -> Callable[..., bool]:
    """The `verify` function of the documentation's verification snippet (docs/security.md), as
    a receiver would run it; every copy of the snippet in README.md and docs/ must be the same."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [m.group(1) for page in pages for m in SNIPPET.finditer(page.read_text("utf-8"))]
    assert found, "the docs lost their webhook verification snippet (docs/security.md)"
    assert len(set(found)) == 1, "the copies of the webhook verification snippet differ"
    scope: dict[str, Any] = {}
    exec(found[0], scope)  # noqa: S102 - the documentation's own code, as users copy it
    return scope["verify"]
