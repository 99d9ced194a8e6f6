"""The rate limiter contract; each limiter's tests inherit it and provide `limiters`.

`limiters(count, **limits)` gives `count` limiters on one shared budget, as `count` workers
hold them: the one in-process limiter `count` times, or `count` clients of one Redis bucket.

A limiter reserves capacity and returns the wait that repays its debt (`_reserve`), then
`acquire` sleeps it. The ledger is read from those waits, without sleeping them: rates here
are slow (one request per 100 s), so a busy machine's delays (seconds) cannot blur which
reservation owed what, and a test checks each wait against the debt it must repay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from core.ports import RateLimiter
from tests.contracts.state_store import _run_threads

Limiters = Callable[..., list[Any]]
SLOW_RPM = 0.6  # one request per 100 s: wait k comes 100 s after wait k-1
EPS = 1e-3  # Redis answers in microseconds, rounded


def reserve_all(limiter: Any, costs: list[int]) -> tuple[list[float], float]:
    """The waits of reserving `costs` one after another, and how long the reserving took."""
    started = time.monotonic()
    waits = [limiter._reserve(cost) for cost in costs]
    return waits, time.monotonic() - started


def assert_debts(waits: list[float], debts: list[float], span: float) -> None:
    """Each wait is its debt (seconds of refill owed) less the time passed since the first
    reservation, which is at most `span`."""
    for wait, debt in zip(waits, debts, strict=True):
        assert max(0.0, debt - span) - EPS <= wait <= max(0.0, debt) + EPS, (waits, debts, span)


def reserve_in_process(url: str, key: str, count: int, barrier: Any, out: Any) -> None:
    """A worker process's body (kept in this light module, which `spawn` imports): `count`
    reservations on a Redis bucket; puts their waits and when it started and ended."""
    from core.llm.ratelimit import RedisRateLimiter

    limiter = RedisRateLimiter(url, key, requests_per_minute=SLOW_RPM)
    barrier.wait()
    started = time.monotonic()  # one clock for every process on the machine
    waits = [limiter._reserve(10) for _ in range(count)]
    out.put((waits, started, time.monotonic()))
    limiter.close()


class RateLimiterContract:
    """Behaviour every rate limiter must show."""

    def test_is_a_rate_limiter(self, limiters: Limiters) -> None:
        [limiter] = limiters(1, requests_per_minute=SLOW_RPM)
        assert isinstance(limiter, RateLimiter)

    def test_requests_beyond_the_burst_wait_one_interval_each(self, limiters: Limiters) -> None:
        [limiter] = limiters(1, requests_per_minute=SLOW_RPM)
        waits, span = reserve_all(limiter, [0] * 5)
        assert_debts(waits, [0, 100, 200, 300, 400], span)

    def test_burst_seconds_sizes_the_bucket(self, limiters: Limiters) -> None:
        [limiter] = limiters(1, requests_per_minute=SLOW_RPM, burst_seconds=300)  # 3 requests
        waits, span = reserve_all(limiter, [0] * 5)
        assert_debts(waits, [0, 0, 0, 100, 200], span)

    def test_tokens_are_reserved_up_front(self, limiters: Limiters) -> None:
        # 0.1 tokens/s, a bucket of 10: 5 tokens per request, two requests free, then 50 s each.
        [limiter] = limiters(1, tokens_per_minute=6, burst_seconds=100)
        waits, span = reserve_all(limiter, [5, 5, 5, 5, 0])
        assert_debts(waits, [0, 0, 50, 100, 100], span)

    def test_the_larger_of_the_two_debts_is_waited(self, limiters: Limiters) -> None:
        # Requests: a bucket of 1 at 0.01/s. Tokens: a bucket of 10 at 0.1/s.
        [limiter] = limiters(
            1, requests_per_minute=SLOW_RPM, tokens_per_minute=6, burst_seconds=100
        )
        waits, span = reserve_all(limiter, [0, 0, 50])
        assert_debts(waits, [0, 100, 400], span)  # the request debt, then the token debt

    def test_limiters_of_one_budget_share_it_across_threads(self, limiters: Limiters) -> None:
        shared = limiters(4, requests_per_minute=SLOW_RPM)
        waits: list[float] = []
        started = time.monotonic()

        def work(worker: int) -> None:
            waits.extend(shared[worker]._reserve(0) for _ in range(5))

        _run_threads(4, work)
        span = time.monotonic() - started
        # 20 reservations served one at a time from one bucket, whatever the interleaving;
        # a bucket per worker would owe at most 400 s.
        assert_debts(sorted(waits), [100.0 * k for k in range(20)], span)

    @pytest.mark.slow  # waits 2.2 s for the bucket to refill
    def test_the_bucket_refills_with_time(self, limiters: Limiters) -> None:
        [limiter] = limiters(1, requests_per_minute=600)  # 10/s, a bucket of 10
        waits, span = reserve_all(limiter, [0] * 20)
        assert_debts(waits, [max(0, k - 9) / 10 for k in range(20)], span)
        time.sleep(2.2)  # at least 2.2 s: 1 s repays the debt, 1 s more fills the bucket
        waits, span = reserve_all(limiter, [0] * 10)
        assert_debts(waits, [0] * 10, span)

    def test_acquire_sleeps_the_wait(self, limiters: Limiters) -> None:
        [limiter] = limiters(1, requests_per_minute=120)  # 2/s, a bucket of 2

        async def three() -> None:
            for _ in range(3):
                await limiter.acquire()

        started = time.monotonic()
        asyncio.run(three())
        # The third request owes 0.5 s less the time the first two took; acquire waits it.
        assert time.monotonic() - started >= 0.5 - EPS
