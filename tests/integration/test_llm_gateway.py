"""The LLM gateway (client, cache, limiters, extractor, embedder) against the test LLM server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import numpy as np
import pytest

from core.embeddings.openai_embedder import OpenAIEmbedder
from core.llm.cache import LLMCache
from core.llm.client import LLMClient, LLMError
from core.llm.extractor import ExtractionFailed, LLMExtractor
from core.llm.retries import backoff_delay, retry_after_seconds
from core.models.extraction import KnowledgeGraph
from core.settings import Settings
from core.stores.factory import llm_client
from core.stores.redis.state import RedisStateStore
from core.stores.sqlite.state import SQLiteStateStore
from tests.backends import RedisBackend
from tests.llm_server import LLMTestServer, graph_for_text

TEXTS = [
    f"Person{i} Smith founded Company{i} Labs in City{i}. Person{i} Smith works for "
    f"Company{i} Labs. The work was published in Journal{i}."
    for i in range(40)
]


@pytest.fixture
def llm_server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


# Far above the slowest answer of a loaded machine, so only an injected hang ever times out
# (a slow answer taken for a timeout would add a retry and break the exact counts below).
TIMEOUT = 3.0
HANG = 60.0  # an injected hang outlasts any client timeout; closing the server ends it


def make_client(server: LLMTestServer, **options: Any) -> LLMClient:
    # Small backoff so retry tests take milliseconds.
    defaults: dict[str, Any] = {"timeout": 30.0, "backoff_base": 0.02, "backoff_cap": 0.2}
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


def test_cached_replies_are_compressed_and_expire_by_default(
    llm_server: LLMTestServer, redis_backend: RedisBackend
) -> None:
    """The LLM cache is transient: a cognify job leaves one reply per chunk behind, so the
    runtime's client stores each compressed and with a TTL, not for ever."""
    client_of = redis_backend.adapter_client(decode_responses=True)
    state = RedisStateStore(redis_backend.url, prefix=redis_backend.prefix, client=client_of)
    settings = Settings(llm_base_url=llm_server.base_url, llm_model="test-model")
    client = llm_client(settings, state)
    assert client is not None
    text = " ".join(TEXTS[:8])
    assert ask(client, text) == expected(text)
    with redis_backend.client(decode_responses=True) as raw:
        [key] = list(raw.scan_iter(match=f"{redis_backend.prefix}llm-cache:*"))
        assert 0 < raw.ttl(key) <= settings.llm_cache_ttl_seconds
        reply = json.dumps(graph_for_text(text))
        assert len(raw.get(key)) < len(reply) / 2, "stored compressed"
        raw.set(f"{redis_backend.prefix}llm-cache:older", reply)  # written before compression
    cache = LLMCache(state)
    assert cache.get("older") == reply and cache.get("missing") is None
    again = llm_client(settings, state)
    assert again is not None and ask(again, text) == expected(text)
    assert llm_server.calls() == 1 and again.stats.cache_hits == 1
    state.close()


@pytest.mark.slow
def test_429_waits_for_retry_after_then_succeeds(llm_server: LLMTestServer) -> None:
    llm_server.configure(fail_first=1, fail_kind="429", retry_after=1)
    client = make_client(llm_server)
    started = time.perf_counter()
    assert ask(client, TEXTS[0]) == expected(TEXTS[0])
    elapsed = time.perf_counter() - started
    # At least the second asked for; the exact pause is backoff_delay's (checked below); the
    # upper bound only catches a pause of another order (a backoff cap, a misread unit).
    assert 1.0 <= elapsed < 11.0, f"Retry-After: 1 not honoured, retried after {elapsed:.2f}s"
    assert llm_server.stats()["faults"] == {"429": 1}
    assert client.stats.retries == 1


def test_retry_after_sets_the_pause_before_the_next_attempt() -> None:
    for attempt in (1, 2, 5):
        assert 1.0 <= backoff_delay(attempt, 1.0, 0.02, 0.2) <= 1.02
        assert 0 <= backoff_delay(attempt, None, 0.02, 0.2) <= 0.2


def test_retry_after_may_be_an_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    wait = retry_after_seconds({"retry-after": format_datetime(when, usegmt=True)})
    assert wait is not None and 28 <= wait <= 30
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "soon"}) is None


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["500", "timeout"])
def test_server_errors_and_timeouts_are_retried(llm_server: LLMTestServer, kind: str) -> None:
    llm_server.configure(fail_first=2, fail_kind=kind, hang_seconds=HANG)
    client = make_client(llm_server, timeout=TIMEOUT)
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


@pytest.mark.slow
def test_calls_run_concurrently(llm_server: LLMTestServer) -> None:
    # Each answer takes 1 s: the 16 calls of a wave are all sent long before the first returns.
    llm_server.configure(latency_ms=1000)
    extractor = LLMExtractor(make_client(llm_server), concurrency=16)
    graphs = extractor.extract(TEXTS[:32])
    assert graphs == [expected(t) for t in TEXTS[:32]]
    # The server held 16 calls at once, never more: the concurrency, counted where it lands.
    assert llm_server.stats()["peak_in_flight"] == 16


# Extracts a text from sync code (the process's LLM loop), says which HTTP client the SDK got,
# and exits: every session closed, nothing printed about unclosed ones.
TRANSPORT_SCRIPT = """
import sys
from core.llm.client import LLMClient
from core.llm.extractor import LLMExtractor
extractor = LLMExtractor(LLMClient(sys.argv[1], "test-model"))
assert extractor.extract(["Ada Lovelace met Charles Babbage in London."])[0].entities
print(*(type(sdk._client).__name__ for sdk in extractor.client._sdks.values()))
"""


@pytest.mark.slow  # a Python process of its own per case, importing the LLM stack
@pytest.mark.parametrize(
    ("proxy", "client"),
    [(None, "_DefaultAioHttpClient"), ("http://127.0.0.1:9", "_DefaultAsyncHttpxClient")],
)
def test_sync_calls_go_over_aiohttp_unless_a_proxy_is_set(
    llm_server: LLMTestServer, proxy: str | None, client: str
) -> None:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    if proxy:  # the proxy would refuse the call: only no_proxy lets it reach the server
        env.update(HTTPS_PROXY=proxy, HTTP_PROXY=proxy, NO_PROXY="127.0.0.1")
    run = subprocess.run(
        [sys.executable, "-X", "dev", "-c", TRANSPORT_SCRIPT, llm_server.base_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [client]
    assert "nclosed" not in run.stderr, run.stderr  # "Unclosed client session" / "connector"


@pytest.mark.slow  # 32 calls of a second each through 8 slots: waits 4 s
def test_threads_share_one_in_flight_cap_per_process(llm_server: LLMTestServer) -> None:
    llm_server.configure(latency_ms=1000)
    extractor = LLMExtractor(make_client(llm_server, max_in_flight=8), concurrency=16)
    with ThreadPoolExecutor(2) as pool:  # two batches at once, as two worker threads
        results = list(pool.map(extractor.extract, [TEXTS[:16], TEXTS[16:32]]))
    assert results == [[expected(t) for t in TEXTS[:16]], [expected(t) for t in TEXTS[16:32]]]
    # 32 calls through 8 slots: the server never held more than 8 at once (a cap per batch
    # would allow 16), and held 8 (the cap is not a lower one).
    assert llm_server.stats()["peak_in_flight"] == 8


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


@pytest.mark.slow
def test_extractor_survives_mixed_faults(llm_server: LLMTestServer) -> None:
    rates = {f"rate_{kind}": 0.05 for kind in ("429", "500", "timeout", "malformed")}
    llm_server.configure(**rates, retry_after=0.1, hang_seconds=HANG, latency_ms=20, seed=3)
    # Only injected hangs time out and retry (see TIMEOUT).
    client = make_client(llm_server, timeout=TIMEOUT, max_attempts=10)
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
    from runtime import Runtime

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
