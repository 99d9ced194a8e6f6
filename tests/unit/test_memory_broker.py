"""The embedded broker serves a queue's messages by priority, lowest number first, as Redis does:
a batch's later steps run before other batches' first steps, so an embedded job's batches finish
one after another (progress moves, results become searchable) instead of all at its end."""

from __future__ import annotations

from queue import Empty

import pytest
from kombu import Connection

from core.settings import Settings
from workers.celery_app import app, celery_config, configure
from workers.memory_broker import TRANSPORT, Channel


def drain(conn: Connection, name: str) -> list[int]:
    queue = conn.SimpleQueue(name)
    got = []
    try:
        while True:
            message = queue.get(block=False)
            got.append(message.payload["i"])
            message.ack()
    except Empty:
        return got
    finally:
        queue.close()


def test_lowest_priority_number_first_and_in_order_within_one() -> None:
    with Connection("memory://", transport=TRANSPORT) as conn:
        queue = conn.SimpleQueue("priorities")
        for i, priority in enumerate([5, 0, 9, 0, 5, 42]):  # 42 is clamped to 9
            queue.put({"i": i}, priority=priority)
        queue.close()
        assert drain(conn, "priorities") == [1, 3, 0, 4, 2, 5]
        assert drain(conn, "priorities") == []


def test_a_message_without_priority_goes_first() -> None:
    with Connection("memory://", transport=TRANSPORT) as conn:
        queue = conn.SimpleQueue("unprioritised")
        queue.put({"i": 0}, priority=3)
        queue.put({"i": 1})
        queue.close()
        assert drain(conn, "unprioritised") == [1, 0]


@pytest.mark.parametrize(
    ("broker", "transport"), [("memory://", TRANSPORT), ("redis://127.0.0.1:1/0", None)]
)
def test_the_app_uses_it_for_memory_urls_only(broker: str, transport: str | None) -> None:
    assert celery_config(Settings(broker_url=broker))["broker_transport"] == transport


def test_the_embedded_app_publishes_through_it() -> None:
    configure(Settings())
    with app.connection_for_write() as conn:
        assert isinstance(conn.default_channel, Channel)
