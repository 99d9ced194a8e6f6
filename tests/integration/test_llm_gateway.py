"""The LLM gateway (client, cache, limiters, extractor, embedder) against the test LLM server."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import numpy as np
import pytest
import redis

from core.embeddings.openai_embedder import OpenAIEmbedder
from core.llm.cache import LLMCache
from core.llm.client import LLMClient, LLMError, retry_after_seconds
from core.llm.extractor import ExtractionFailed, LLMExtractor
from core.llm.ratelimit import LocalRateLimiter, RedisRateLimiter
from core.models.extraction import KnowledgeGraph
from core.ports import StoreError
from core.stores.state_sqlite import SQLiteStateStore
from tests.llm_server import LLMTestServer, graph_for_text
from tests.services import redis_url

pytestmark = pytest.mark.integration

TEXTS = [
    f"Person{i} Smith founded Company{i} Labs in City{i}. Person{i} Smith works for "
    f"Company{i} Labs. The work was published in Journal{i}."
    for i in range(40)
]


@pytest.fixture
def llm_server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def make_client(server: LLMTestServer, **options: Any) -> LLMClient:
    # Small backoff so retry tests take milliseconds; the timeout matters for timeout faults.
    defaults: dict[str, Any] = {"timeout": 2.0, "backoff_base": 0.02, "backoff_cap": 0.2}
    return LLMClient(server.base_url, "test-model", **{**defaults, **options})


def expected(text: str) -> KnowledgeGraph:
    return KnowledgeGraph.model_validate(graph_for_text(text))


def ask(client: LLMClient, text: str) -> KnowledgeGraph:
    """One structured call from sync code, closing its connections."""
    messages = [{"role": "system", "content": "Extract."}, {"role": "user", "content": text}]

    async def call() -> KnowledgeGraph:
        try:
            return await client.structured(messages, KnowledgeGraph)
        finally:
            await client.aclose()

    return asyncio.run(call())


def test_extractor_returns_one_validated_graph_per_text(llm_server: LLMTestServer) -> None:
    extractor = LLMExtractor(make_client(llm_server))
    graphs = extractor.extract(TEXTS[:3])
    assert extractor.name == "llm:test-model"
    assert graphs == [expected(text) for text in TEXTS[:3]]
    assert graphs[0].relationships[0].name == "founded"
    assert llm_server.calls() == 3
    assert extractor.client.stats.fallbacks == 0


def test_rejected_json_schema_falls_back_to_json_object_once(llm_server: LLMTestServer) -> None:
    llm_server.configure(reject_json_schema=True)
    client = make_client(llm_server)
    assert ask(client, TEXTS[0]) == expected(TEXTS[0])
    assert ask(client, TEXTS[1]) == expected(TEXTS[1])
    # One rejected json_schema request, then json_object only: 3 requests for 2 texts.
    assert client.stats.fallbacks == 1
    assert llm_server.calls() == 3


def test_cache_hit_makes_no_second_call(llm_server: LLMTestServer, tmp_path) -> None:
    state = SQLiteStateStore(tmp_path / "state.db")
    first = make_client(llm_server, cache=LLMCache(state, ttl=60))
    assert ask(first, TEXTS[0]) == expected(TEXTS[0])
    assert ask(first, TEXTS[0]) == expected(TEXTS[0])
    # Another client (another worker) sharing the store hits the same entry.
    second = make_client(llm_server, cache=LLMCache(state, ttl=60))
    assert ask(second, TEXTS[0]) == expected(TEXTS[0])
    assert llm_server.calls() == 1
    assert (first.stats.cache_hits, second.stats.cache_hits) == (1, 1)
    ask(second, TEXTS[1])  # another text is a miss
    assert llm_server.calls() == 2
    state.close()


def test_429_waits_for_retry_after_then_succeeds(llm_server: LLMTestServer) -> None:
    llm_server.configure(fail_first=1, fail_kind="429", retry_after=1)
    client = make_client(llm_server)
    started = time.perf_counter()
    assert ask(client, TEXTS[0]) == expected(TEXTS[0])
    elapsed = time.perf_counter() - started
    assert 1.0 <= elapsed < 2.0, f"Retry-After: 1 not honoured, retried after {elapsed:.2f}s"
    assert llm_server.stats()["faults"] == {"429": 1}
    assert client.stats.retries == 1


def test_retry_after_may_be_an_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    wait = retry_after_seconds({"retry-after": format_datetime(when, usegmt=True)})
    assert wait is not None and 28 <= wait <= 30
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "soon"}) is None


@pytest.mark.parametrize("kind", ["500", "timeout"])
def test_server_errors_and_timeouts_are_retried(llm_server: LLMTestServer, kind: str) -> None:
    llm_server.configure(fail_first=2, fail_kind=kind, hang_seconds=1.0)
    client = make_client(llm_server, timeout=0.3)
    assert ask(client, TEXTS[0]) == expected(TEXTS[0])
    assert llm_server.stats()["faults"] == {kind: 2}
    assert (client.stats.requests, client.stats.retries) == (3, 2)


def test_malformed_json_is_repaired_by_one_retry(llm_server: LLMTestServer) -> None:
    llm_server.configure(fail_first=1, fail_kind="malformed")
    client = make_client(llm_server)
    assert ask(client, TEXTS[0]) == expected(TEXTS[0])
    assert llm_server.calls() == 2
    assert (client.stats.repairs, client.stats.retries) == (1, 0)


def test_all_attempts_failing_raises_a_clear_error(llm_server: LLMTestServer) -> None:
    llm_server.configure(rate_500=1.0)
    client = make_client(llm_server, max_attempts=3)
    with pytest.raises(LLMError) as caught:
        ask(client, TEXTS[0])
    message = str(caught.value)
    assert f"{llm_server.base_url}/chat/completions" in message
    assert "HTTP 500" in message and "3 attempts" in message
    assert llm_server.calls() == 3
    assert client.stats.failures == 1


def test_client_errors_are_not_retried(llm_server: LLMTestServer) -> None:
    client = LLMClient(llm_server.base_url.replace("/v1", "/nope"), "test-model")
    with pytest.raises(LLMError, match=r"HTTP 404 .*not retryable"):
        ask(client, TEXTS[0])
    assert llm_server.stats()["requests"] == {"/nope/chat/completions": 1}


def test_extractor_names_the_texts_that_failed(llm_server: LLMTestServer) -> None:
    llm_server.configure(rate_500=0.5, seed=7)
    texts = TEXTS[:10]
    with pytest.raises(ExtractionFailed) as caught:
        LLMExtractor(make_client(llm_server, max_attempts=1)).extract(texts)
    failed = caught.value
    assert len(failed.failures) == llm_server.stats()["faults"]["500"]
    assert f"failed for {len(failed.failures)} of 10 texts" in str(failed)
    for index, graph in enumerate(failed.results):
        assert (graph is None) == (index in failed.failures)
        assert graph is None or graph == expected(texts[index])


def test_calls_run_concurrently(llm_server: LLMTestServer) -> None:
    llm_server.configure(latency_ms=200)
    extractor = LLMExtractor(make_client(llm_server), concurrency=16)
    started = time.perf_counter()
    graphs = extractor.extract(TEXTS[:32])
    elapsed = time.perf_counter() - started
    # Two waves of 16 at 200 ms; one at a time would take 6.4 s, four at a time 1.6 s.
    assert 0.4 <= elapsed < 1.5, f"32 calls took {elapsed:.2f}s"
    assert graphs == [expected(t) for t in TEXTS[:32]]


def test_threads_share_one_in_flight_cap_per_process(llm_server: LLMTestServer) -> None:
    llm_server.configure(latency_ms=200)
    extractor = LLMExtractor(make_client(llm_server, max_in_flight=8), concurrency=16)
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:  # two batches at once, as two worker threads
        results = list(pool.map(extractor.extract, [TEXTS[:16], TEXTS[16:32]]))
    elapsed = time.perf_counter() - started
    # 32 calls through 8 slots: four waves of 200 ms. A cap per batch would allow 16 at once.
    assert 0.78 <= elapsed < 2.0, f"32 calls took {elapsed:.2f}s"
    assert results == [[expected(t) for t in TEXTS[:16]], [expected(t) for t in TEXTS[16:32]]]


def test_limiter_is_awaited_before_every_attempt(llm_server: LLMTestServer) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.tokens: list[int] = []

        async def acquire(self, tokens: int = 0) -> None:
            self.tokens.append(tokens)

    recorder = Recorder()
    llm_server.configure(fail_first=1)
    ask(make_client(llm_server, limiter=recorder), TEXTS[0])
    assert len(recorder.tokens) == 2 and all(t > len(TEXTS[0]) // 4 for t in recorder.tokens)


def test_local_limiter_enforces_requests_per_minute_across_threads() -> None:
    limiter = LocalRateLimiter(requests_per_minute=300)  # 5/s, bucket of 5

    def six_calls() -> None:
        async def run() -> None:
            for _ in range(6):
                await limiter.acquire()

        asyncio.run(run())

    threads = [threading.Thread(target=six_calls) for _ in range(2)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    assert 1.3 <= elapsed < 2.0, f"12 requests at 5/s (burst 5) took {elapsed:.2f}s"


def test_local_limiter_enforces_tokens_per_minute() -> None:
    limiter = LocalRateLimiter(tokens_per_minute=6000)  # 100/s, bucket of 100

    async def run() -> None:
        for _ in range(5):
            await limiter.acquire(50)

    started = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - started
    assert 1.4 <= elapsed < 2.0, f"250 tokens at 100/s (burst 100) took {elapsed:.2f}s"


def _acquire_in_process(url: str, key: str, count: int, barrier: Any, out: Any) -> None:
    """Worker process body: `count` acquisitions on the shared bucket, with their times."""
    limiter = RedisRateLimiter(url, key, requests_per_minute=300)

    async def run() -> list[float]:
        stamps = []
        for _ in range(count):
            await limiter.acquire(10)
            stamps.append(time.time())
        return stamps

    barrier.wait()
    out.put(asyncio.run(run()))
    limiter.close()


@pytest.mark.services
def test_redis_limiter_is_global_across_processes() -> None:
    url, key = redis_url(), f"cogmill-test:ratelimit:{uuid.uuid4().hex}"
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    workers = [
        context.Process(target=_acquire_in_process, args=(url, key, 10, barrier, out))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    stamps = sorted(out.get(timeout=30) + out.get(timeout=30))
    for worker in workers:
        worker.join(timeout=10)
    redis.Redis.from_url(url).delete(key)
    # 20 requests at 5/s with a bucket of 5: never more than 5 + 5*t granted by time t
    # (+2 because a stamp is taken after its grant, possibly late on a busy machine).
    start = stamps[0]
    for granted, stamp in enumerate(stamps, start=1):
        assert granted <= 5 + 5 * (stamp - start) + 2, f"{granted} granted after {stamp - start}"
    span = stamps[-1] - start
    # One bucket per process would let them finish in ~1 s.
    assert 2.8 <= span < 4.5, f"20 requests from 2 processes took {span:.2f}s, expected ~3.0s"


def test_redis_limiter_names_an_unreachable_server_without_its_password() -> None:
    url = "redis://:secret@127.0.0.1:1/0"
    asyncio.run(RedisRateLimiter(url, "k").acquire(10))  # unlimited: Redis is never asked
    limiter = RedisRateLimiter(url, "k", requests_per_minute=60)
    with pytest.raises(StoreError, match="127.0.0.1:1") as caught:
        asyncio.run(limiter.acquire(10))
    assert "secret" not in str(caught.value)


def test_extractor_survives_mixed_faults(llm_server: LLMTestServer) -> None:
    rates = {f"rate_{kind}": 0.05 for kind in ("429", "500", "timeout", "malformed")}
    llm_server.configure(**rates, retry_after=0.1, hang_seconds=3.0, latency_ms=20, seed=3)
    # Far above a loaded machine's slowest answer: only injected hangs time out and retry.
    client = make_client(llm_server, timeout=1.5, max_attempts=10)
    graphs = LLMExtractor(client, concurrency=16).extract(TEXTS)
    assert graphs == [expected(t) for t in TEXTS]
    faults = llm_server.stats()["faults"]
    assert sum(faults.values()) >= 5, faults
    assert client.stats.repairs == faults.get("malformed", 0)
    assert client.stats.retries == sum(faults.get(k, 0) for k in ("429", "500", "timeout"))


def test_openai_embedder_returns_normalised_similar_vectors(llm_server: LLMTestServer) -> None:
    llm_server.configure(embedding_dim=128, fail_first=1, fail_kind="429", retry_after=0)
    embedder = OpenAIEmbedder(
        llm_server.base_url, "test-embed", dim=128, batch_size=2, backoff_base=0.01
    )
    texts = ["the cat sat on the mat", "the cat sat on a mat", "quarterly revenue grew"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 128) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.7 > vectors[0] @ vectors[2]
    assert np.array_equal(embedder.embed(texts[:1])[0], vectors[0])
    # Three distinct requests (two batches, then one more), each answered 429 once first.
    assert llm_server.calls("/v1/embeddings") == 3 * 2
    with pytest.raises(LLMError, match="128-dim vectors, configured dim is 64"):
        OpenAIEmbedder(llm_server.base_url, "test-embed", dim=64).embed(["x"])
    with pytest.raises(ValueError):
        embedder.embed([])
    embedder.close()


def test_openai_embedder_reads_base64_and_float_lists_alike(llm_server: LLMTestServer) -> None:
    llm_server.configure(embedding_dim=96)
    embedder = OpenAIEmbedder(llm_server.base_url, "test-embed", dim=96)
    texts = ["Marie Curie was born in Warsaw.", "Paris is in France."]
    as_base64 = embedder.embed(texts)
    llm_server.configure(floats_only=True)  # as servers that ignore encoding_format answer
    try:
        assert np.array_equal(embedder.embed(texts), as_base64)
        assert as_base64.dtype == np.float32 and as_base64.shape == (2, 96)
    finally:
        llm_server.configure(floats_only=False)
        embedder.close()


def test_settings_choose_the_llm_extractor_and_embeddings_endpoint(tmp_path) -> None:  # noqa: ANN001
    from core.settings import Settings
    from workers.runtime import Runtime

    with LLMTestServer(embedding_dim=64) as server:
        settings = Settings(
            home=tmp_path,
            llm_base_url=server.base_url,
            embedding_base_url=server.base_url,
            embedding_dim=64,
        )
        runtime = Runtime(settings)
        try:
            [graph] = runtime.extractor.extract(["Ada Lovelace met Charles Babbage in London."])
            assert {"Ada Lovelace", "Charles Babbage"} <= {e.name for e in graph.entities}
            vectors = runtime.embedder.embed(["a", "b"])
            assert vectors.shape == (2, 64)
            assert server.calls("/v1/embeddings") >= 1
        finally:
            runtime.close()
