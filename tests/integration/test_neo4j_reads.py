"""Auto-committed reads (Neo4jConnection.read, which GRAPH_PPR's graph and vector reads go
through) are re-run on the errors a managed transaction would be retried on, and only those:
a server that is down at first answers them once it is up; a wrong statement fails at once.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from neo4j.exceptions import CypherSyntaxError, ServiceUnavailable

from core.stores.neo4j.connection import Neo4jConnection
from tests.services import neo4j_uri

pytestmark = pytest.mark.services


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        sink.close()


@contextmanager
def server_up_after(delay_s: float) -> Iterator[str]:
    """A bolt URI whose port refuses connections for `delay_s`, then forwards them to the
    test Neo4j (as a server coming back from a restart does)."""
    target = neo4j_uri().rpartition("/")[2].rpartition(":")
    port, stop = _free_port(), threading.Event()

    def serve() -> None:
        time.sleep(delay_s)
        with socket.create_server(("127.0.0.1", port)) as listener:
            listener.settimeout(0.1)
            while not stop.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                upstream = socket.create_connection((target[0], int(target[2])))
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"bolt://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join()


def test_a_read_waits_for_a_server_coming_back() -> None:
    with server_up_after(1.0) as uri:
        conn = Neo4jConnection(uri, initial_retry_delay=0.05, max_transaction_retry_time=20)
        try:
            started = time.monotonic()
            [record] = conn.read("RETURN $x AS x", {"x": 7})
            assert record["x"] == 7
            assert time.monotonic() - started >= 0.9  # it was refused first, then retried
        finally:
            conn.close()


def test_a_read_gives_up_after_the_retry_time() -> None:
    conn = Neo4jConnection(
        f"bolt://127.0.0.1:{_free_port()}", initial_retry_delay=0.05, max_transaction_retry_time=1
    )
    try:
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable):
            conn.read("RETURN 1", {})
        assert 0.3 <= time.monotonic() - started <= 5
    finally:
        conn.close()


def test_a_wrong_statement_is_not_retried() -> None:
    conn = Neo4jConnection(neo4j_uri(), initial_retry_delay=1, max_transaction_retry_time=30)
    try:
        started = time.monotonic()
        with pytest.raises(CypherSyntaxError):
            conn.read("RETURN RETURN", {})
        assert time.monotonic() - started < 1
    finally:
        conn.close()
