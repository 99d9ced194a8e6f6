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
