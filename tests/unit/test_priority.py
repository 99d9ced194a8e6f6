"""core/priority.py: background work waits at its safe points while urgent work runs."""

from __future__ import annotations

import threading
import time

import pytest

from core.priority import Priority


def test_nothing_urgent_means_no_wait() -> None:
    priority = Priority(most_wait_s=5.0)
    started = time.monotonic()
    for _ in range(10_000):
        priority.wait_turn()
    assert time.monotonic() - started < 1.0
    assert priority.waits == 0


def test_background_waits_until_the_last_urgent_block_ends() -> None:
    priority = Priority(most_wait_s=10.0)
    first, second = priority.urgent(), priority.urgent()
    first.__enter__()
    second.__enter__()
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (priority.wait_turn(), done.set()))
    waiter.start()
    assert not done.wait(0.3)  # two urgent blocks open
    first.__exit__(None, None, None)
    assert not done.wait(0.3)  # one still open
    second.__exit__(None, None, None)
    assert done.wait(5.0)  # woken when none is left, long before most_wait_s
    waiter.join()
    assert priority.waits == 1


def test_a_wait_is_bounded_so_a_stream_of_urgent_work_cannot_stall_a_job() -> None:
    priority = Priority(most_wait_s=0.2)
    with priority.urgent():
        started = time.monotonic()
        priority.wait_turn()
        waited = time.monotonic() - started
    assert 0.15 <= waited < 2.0


def test_an_urgent_block_that_raises_still_ends() -> None:
    priority = Priority(most_wait_s=10.0)
    with pytest.raises(RuntimeError), priority.urgent():
        raise RuntimeError("the search failed")
    started = time.monotonic()
    priority.wait_turn()
    assert time.monotonic() - started < 1.0


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="most_wait_s"):
        Priority(most_wait_s=-1)


def test_quiet_means_no_urgent_block_for_a_while() -> None:
    priority = Priority()
    started = time.monotonic()
    assert priority.wait_quiet(0.2, timeout=5.0)  # nothing urgent ever ran: quiet at once
    assert time.monotonic() - started < 0.1
    with priority.urgent():
        pass
    started = time.monotonic()
    assert priority.wait_quiet(0.3, timeout=5.0)  # one ended just now: quiet 0.3 s later
    assert 0.25 <= time.monotonic() - started < 2.0


def test_quiet_waits_out_a_stream_of_urgent_blocks_and_gives_up_at_the_timeout() -> None:
    priority = Priority(most_wait_s=0.01)
    stop = threading.Event()

    def searches() -> None:  # back to back, 5 ms gaps: never quiet for 0.1 s
        while not stop.is_set():
            with priority.urgent():
                time.sleep(0.02)
            time.sleep(0.005)

    stream = threading.Thread(target=searches)
    stream.start()
    try:
        started = time.monotonic()
        assert not priority.wait_quiet(0.1, timeout=0.6)
        assert 0.55 <= time.monotonic() - started < 2.0  # the stream held it to the timeout
    finally:
        stop.set()
        stream.join()
    started = time.monotonic()
    assert priority.wait_quiet(0.1, timeout=5.0)  # the stream ended: quiet 0.1 s later
    assert time.monotonic() - started < 1.0
