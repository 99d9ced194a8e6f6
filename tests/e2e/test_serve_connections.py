"""The connections a real `cogmill serve` holds are bounded (api/http/connections.py): a
trickling request head is answered 408 and closed (a silent connection just closed), a body
that stops coming is cut off, connections over the caps (per client address, in all) are
answered 503 at once, and the cap stays under the process' file descriptor limit. Before,
as many silent sockets as the process could open stopped it: /health timed out and asyncio
logged every failed accept."""

from __future__ import annotations

import json
import resource
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from api.http.connections import DESCRIPTORS_KEPT, TOO_MANY
from tests.e2e.serve_support import cogmill_serve

pytestmark = pytest.mark.slow  # a `cogmill serve` process

HEAD_TIMEOUT_S = 1.0
BODY_IDLE_S = 1.0
PER_CLIENT = 6
DESCRIPTORS = DESCRIPTORS_KEPT + 30  # the server's hard limit: it may hold 30 connections
TOO_MANY_BODY = json.loads(TOO_MANY.partition(b"\r\n\r\n")[2])
GET = b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
TRICKLE_S = 0.1  # between the bytes of a trickling head


@dataclass
class Served:
    port: int
    log: Path

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        """A connection from `source` (any 127.x.y.z address reaches the loopback server)."""
        return socket.create_connection(
            ("127.0.0.1", self.port), timeout=10, source_address=(source, 0)
        )

    def health(self, source: str) -> int:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, timeout=10) as client:
            return client.get(f"http://127.0.0.1:{self.port}/health").status_code


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("connections-home")
    settings = {
        "api_head_timeout_seconds": HEAD_TIMEOUT_S,
        "api_body_idle_seconds": BODY_IDLE_S,
        "api_max_connections_per_client": PER_CLIENT,
    }  # api_max_connections stays 1,000: more than the descriptor limit allows
    with cogmill_serve(home, settings, preexec_fn=limit_descriptors) as url:
        yield Served(int(url.rsplit(":", 1)[1]), home / "serve.log")


def answer(conn: socket.socket) -> tuple[int, dict[str, object], float]:
    """The status and JSON body of the one answer on `conn` (read until the server closes
    it), and the seconds that took."""
    started, data = time.monotonic(), b""
    while chunk := conn.recv(4096):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body), time.monotonic() - started


def test_a_silent_or_trickling_head_is_answered_408_and_closed(served: Served) -> None:
    with served.connect() as silent, served.connect() as trickling, served.connect() as kept:
        kept.sendall(GET)  # a whole request, answered; then its next head trickles
        data = b""
        while not data.endswith(b'{"status":"ok"}'):
            data += kept.recv(4096)
        started = time.monotonic()
        for byte in b"GET /health HTTP/1.1\r\n"[: round(0.9 * HEAD_TIMEOUT_S / TRICKLE_S)]:
            trickling.send(bytes([byte]))
            kept.send(bytes([byte]))
            time.sleep(TRICKLE_S)  # each byte in time; the head as a whole not
        answers = [answer(conn) for conn in (trickling, kept)]
        took = time.monotonic() - started
        assert silent.recv(4096) == b""  # it sent nothing: closed without an answer
    for status, body, _ in answers:
        assert (status, body["error"]["code"]) == (408, "request_timeout"), body  # type: ignore[index]
    # Timed from the head's start, not from its last byte (that would take 1.9 timeouts).
    assert took < 1.6 * HEAD_TIMEOUT_S
    assert served.health("127.0.0.1") == 200


def test_a_body_that_stops_coming_is_cut_off_and_one_that_pauses_is_served(
    served: Served,
) -> None:
    home = served.log.parent
    part = b"--b\r\ncontent-disposition: form-data; name=files; filename=a.txt\r\n\r\n"
    upload = (
        b"POST /api/v1/datasets/cutoff/data HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: multipart/form-data; boundary=b\r\ncontent-length: 100000\r\n\r\n"
    )
    body = json.dumps({"query": "who founded the city", "datasets": ["none"]}).encode()
    search = (
        b"POST /api/v1/search HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    )
    third = len(body) // 3 + 1
    with served.connect() as stalled, served.connect() as pausing:
        stalled.sendall(upload + part + b"the first words of a file that never ends")
        pausing.sendall(search + body[:10])
        for i in range(10, len(body), third):
            time.sleep(0.7 * BODY_IDLE_S)  # each pause shorter than the bound, all of them not
            if i == 10:
                assert list(home.glob(".upload-*"))  # the upload is being received
            pausing.sendall(body[i : i + third])
        assert stalled.recv(4096) == b""  # 2.1 bounds after its last byte: long closed
        assert pausing.recv(4096).startswith(b"HTTP/1.1 ")  # answered, whatever the answer
    time.sleep(0.5)  # the upload's temp folder is removed on a request thread
    assert not list(home.glob(".upload-*"))
    with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", timeout=10) as client:
        assert "cutoff" not in client.get("/api/v1/datasets").text


def test_connections_over_a_clients_cap_are_refused_at_once(served: Served) -> None:
    with ExitStack() as open_:
        for _ in range(PER_CLIENT):
            open_.enter_context(served.connect("127.0.0.2"))
        with served.connect("127.0.0.2") as over:
            status, body, took = answer(over)
        assert (status, body) == (503, TOO_MANY_BODY)
        assert took < HEAD_TIMEOUT_S  # refused, not left to time out
        assert served.health("127.0.0.3") == 200  # another address is served meanwhile
    assert served.health("127.0.0.2") == 200  # closed: the address is served again


def test_the_cap_in_all_stays_under_the_descriptor_limit(served: Served) -> None:
    cap = DESCRIPTORS - DESCRIPTORS_KEPT
    assert f"api_max_connections lowered from 1000 to {cap}" in served.log.read_text()
    with ExitStack() as open_:
        held = [
            open_.enter_context(served.connect(f"127.0.1.{i}"))
            for i in range(2 * cap // PER_CLIENT)
            for _ in range(PER_CLIENT)
        ]  # twice the cap: the second half is refused, and the server keeps running
        time.sleep(0.2)
        codes = [answer(conn)[0] for conn in held[cap + 5 :]]
        assert codes == [503] * len(codes)
        with served.connect("127.0.2.1") as late:  # all taken: refused, not hung
            assert answer(late)[:2] == (503, TOO_MANY_BODY)
        time.sleep(HEAD_TIMEOUT_S + 0.5)  # the silent ones are timed out
    assert served.health("127.0.2.1") == 200
    log = served.log.read_text()
    assert "Too many open files" not in log
    assert log.count("api_connections_refused") == 1  # once a minute, not once a refusal
