"""The rate limiter contract in-process and on Redis (fakeredis and the test server), and one
Redis bucket shared by worker processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from core.llm.ratelimit import LocalRateLimiter, RedisRateLimiter
from core.ports import StoreError
from tests.backends import RedisBackend
from tests.contracts.rate_limiter import (
    SLOW_RPM,
    Limiters,
    RateLimiterContract,
    assert_debts,
    reserve_in_process,
)
from tests.services import redis_url


class TestLocalRateLimiter(RateLimiterContract):
    @pytest.fixture
    def limiters(self) -> Limiters:
        # One limiter per process, shared by its worker threads.
        return lambda count, **limits: [LocalRateLimiter(**limits)] * count


class TestRedisRateLimiter(RateLimiterContract):
    @pytest.fixture
    def limiters(self, redis_backend: RedisBackend) -> Iterator[Limiters]:
        made: list[RedisRateLimiter] = []
        key = f"{redis_backend.prefix}llm-rate:test-model"

        def make(count: int, **limits: Any) -> list[RedisRateLimiter]:
            for _ in range(count):  # one client per worker process, one bucket for all
                client = redis_backend.adapter_client(decode_responses=False)
                made.append(RedisRateLimiter(redis_backend.url, key, client=client, **limits))
            return made[-count:]

        yield make
        for limiter in made:
            limiter.close()

    def test_a_key_is_required(self, redis_backend: RedisBackend) -> None:
        with pytest.raises(ValueError, match="key must name the shared bucket"):
            RedisRateLimiter(redis_backend.url, "", requests_per_minute=60)

    def test_the_bucket_expires_once_it_would_be_full_again(
        self, limiters: Limiters, redis_backend: RedisBackend
    ) -> None:
        [limiter] = limiters(1, requests_per_minute=SLOW_RPM)
        limiter._reserve(0)
        limiter._reserve(0)  # 100 s of debt: full again 200 s from now (+1 s of margin)
        with redis_backend.client() as client:
            assert 190_000 <= client.pttl(limiter.key) <= 201_000


@pytest.mark.services
def test_redis_limiter_is_global_across_processes() -> None:
    """Real Redis only: a fakeredis server lives inside one process (the contract's
    `test_limiters_of_one_budget_share_it_across_threads` runs on it instead)."""
    url, key = redis_url(), f"cogmill-test:ratelimit:{uuid.uuid4().hex}"
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    workers = [
        context.Process(target=reserve_in_process, args=(url, key, 10, barrier, out))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    try:
        runs = [out.get(timeout=120), out.get(timeout=120)]
    finally:
        for worker in workers:
            worker.join(timeout=60)
        with redis.Redis.from_url(url) as client:
            client.delete(key)
    assert [worker.exitcode for worker in workers] == [0, 0]
    # 20 reservations from two processes are served one at a time from one bucket (a bucket
    # per process would owe at most 900 s).
    waits = sorted(runs[0][0] + runs[1][0])
    span = max(end for _, _, end in runs) - min(start for _, start, _ in runs)
    assert_debts(waits, [100.0 * k for k in range(20)], span)


def test_redis_limiter_names_an_unreachable_server_without_its_password() -> None:
    url = "redis://:secret@127.0.0.1:1/0"
    asyncio.run(RedisRateLimiter(url, "k").acquire(10))  # unlimited: Redis is never asked
    limiter = RedisRateLimiter(url, "k", requests_per_minute=60)
    with pytest.raises(StoreError, match="127.0.0.1:1") as caught:
        asyncio.run(limiter.acquire(10))
    assert "secret" not in str(caught.value)
