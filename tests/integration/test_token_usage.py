"""Token and cost accounting: a job's totals are what the LLM server answered, summed without
lost increments over worker threads (and over Redis on the distributed backend)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services import jobs
from core.llm.client import LLMClient
from core.llm.extractor import LLMExtractor
from core.llm.usage import Meter, cost_usd, count_tokens, metering
from core.settings import Settings
from runtime import Runtime
from tests.backends import (
    Backend,
    embedded_only,
    finished,
    http_finished,
    ingest,
    llm_settings,
    write_files,
)
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify
from workers.usage import add_usage, job_usage

TEXTS = {
    f"doc{i}.txt": " ".join(
        f"Person{i}x{k} Smith founded Company{i}x{k} Labs in City{k}. Person{i}x{k} Smith works "
        f"for Company{i}x{k} Labs. The work was published in Journal{k}."
        for k in range(1 + i % 3)
    )
    for i in range(7)
}
PRICES = {
    "llm_price_input_per_mtok": 0.15,
    "llm_price_output_per_mtok": 0.6,
    "llm_price_cached_input_per_mtok": 0.075,
    "embedding_price_per_mtok": 0.02,
}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def served(server: LLMTestServer, path: str) -> dict[str, int]:
    """What the server's replies to `path` said (or would have said) in `usage`."""
    tally = server.stats()["usage"].get(f"/v1/{path}", {})
    names = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")
    return {name: tally.get(name, 0) for name in names}


def counted(report: Any, kind: str) -> dict[str, int]:
    totals = getattr(report, kind)
    return {
        name: getattr(totals, name)
        for name in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")
    }


@pytest.mark.slow
@pytest.mark.parametrize("usage", ["chars", "omit"])
def test_job_totals_are_what_the_server_answered(
    backend: Backend, server: LLMTestServer, tmp_path: Path, usage: str
) -> None:
    """Every chat and embeddings reply of the job is counted once, from `usage` or, where the
    server leaves it out, with the tokenizer; the cost is tokens times the prices."""
    server.configure(usage=usage, cached_tokens=7)
    settings = {**llm_settings(server), **PRICES, "batch_size": 2, "chunk_tokens": 32}
    with backend.runtime(threads=3, **settings) as rt:
        dataset = backend.dataset("usage")
        job = ingest(rt, dataset, write_files(tmp_path / "docs", TEXTS))
        report = jobs.show(rt, job.id)
        chat, embeddings = served(server, "chat/completions"), served(server, "embeddings")
        assert chat["calls"] >= len(TEXTS) and embeddings["calls"] > 0, server.stats()
        if usage == "omit":  # no usage, no cached count: the tokenizer counts the rest
            chat["cached_tokens"] = 0
        assert counted(report, "llm") == chat
        assert counted(report, "embeddings") == {**embeddings, "cached_tokens": 0}
        llm = report.llm
        expected = (
            (llm.prompt_tokens - llm.cached_tokens) * 0.15
            + llm.cached_tokens * 0.075
            + llm.completion_tokens * 0.6
        ) / 1e6
        assert llm.cost_usd == pytest.approx(expected, abs=1e-6) and llm.cost_usd > 0
        assert report.embeddings.cost_usd == pytest.approx(
            report.embeddings.prompt_tokens * 0.02 / 1e6, abs=1e-6
        )
        # The steps' shares add up to the job's totals.
        steps = [job_usage(rt.state, job.id, step)["llm"] for step in STEP_NAMES]
        assert all(step["calls"] for step in steps), steps  # both steps asked the LLM
        for name in ("calls", "prompt_tokens", "completion_tokens"):
            assert sum(step[name] for step in steps) == chat[name]

        # And the documents' shares: every LLM call is about one document.
        documents = [doc.id for doc in rt.catalog.documents(dataset)]
        shares = [job_usage(rt.state, job.id, document=doc)["llm"] for doc in documents]
        assert len(documents) == len(TEXTS) and all(share["calls"] for share in shares)
        for name in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens"):
            assert sum(share[name] for share in shares) == chat[name]

        # A re-run of every document: the extraction replies come from the cache.
        before = served(server, "chat/completions")["calls"]
        again = finished(rt, cognify(rt, dataset, None, "all"))
        rerun = jobs.show(rt, again.id)
        assert rerun.llm.cache_hits >= len(TEXTS)
        assert rerun.llm.calls == served(server, "chat/completions")["calls"] - before


STEP_NAMES = ("extract_graph", "summarize_documents")


def test_threads_keep_their_own_meter(server: LLMTestServer) -> None:
    """Calls made under one thread's meter never land in another's (the LLM loop is shared)."""
    client = LLMClient(server.base_url, "test", timeout=30)
    extractor = LLMExtractor(client, concurrency=4)
    meters = [Meter() for _ in range(4)]
    sizes = [3, 5, 7, 9]

    def work(meter: Meter, size: int) -> None:
        with metering(meter):
            extractor.extract([f"Ann{size}x{i} Lee works for Acme{i} Corp." for i in range(size)])

    threads = [threading.Thread(target=work, args=pair) for pair in zip(meters, sizes, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [m.totals()["llm"]["calls"] for m in meters] == sizes
    assert (
        sum(m.totals()["llm"]["prompt_tokens"] for m in meters)
        == served(server, "chat/completions")["prompt_tokens"]
    )


def test_concurrent_adds_lose_nothing(backend: Backend) -> None:
    """Steps finishing at once on many threads all add to the same counters exactly."""
    settings = backend.settings()
    with backend.runtime(threads=1) as rt:
        state = rt.state
        meter = Meter()
        meter.add("llm", calls=1, prompt_tokens=13, completion_tokens=5, cached_tokens=2)
        meter.add("embeddings", calls=1, prompt_tokens=3)
        job_id = f"usage-{backend.tag}"

        def adds() -> None:
            for _ in range(25):
                add_usage(state, job_id, "extract_graph", meter)

        threads = [threading.Thread(target=adds) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        totals = job_usage(state, job_id)
        assert totals["llm"] == {
            "calls": 200,
            "prompt_tokens": 2600,
            "completion_tokens": 1000,
            "cached_tokens": 400,
            "cache_hits": 0,
        }
        assert totals["embeddings"]["prompt_tokens"] == 600
        assert job_usage(state, job_id, "extract_graph") == totals
    assert settings.llm_price_input_per_mtok == 0  # unpriced by default


@embedded_only
def test_local_embedder_calls_are_counted(
    backend: Backend, embedder: object, server: LLMTestServer, tmp_path: Path
) -> None:
    """The local embedder sends nothing anywhere, but its calls and word pieces are counted."""
    settings = {"llm_base_url": server.base_url, "llm_model": "test"}
    with backend.runtime(shared={"embedder": embedder}, **settings) as rt:
        dataset = backend.dataset("local")
        job = ingest(rt, dataset, write_files(tmp_path / "docs", TEXTS))
        report = jobs.show(rt, job.id)
    assert server.calls("/v1/embeddings") == 0 and report.embeddings.calls > 0
    # At least the chunks' own word pieces were read (plus summaries and entity names).
    chunk_tokens = sum(count_tokens(list(TEXTS.values())))
    assert report.embeddings.prompt_tokens > chunk_tokens, report.embeddings
    assert report.llm.calls == served(server, "chat/completions")["calls"]


def test_cost_is_tokens_times_prices() -> None:
    settings = Settings(**PRICES)
    counts = {"prompt_tokens": 1_000_000, "completion_tokens": 500_000, "cached_tokens": 200_000}
    assert cost_usd("llm", counts, settings) == pytest.approx(0.8 * 0.15 + 0.2 * 0.075 + 0.3)
    assert cost_usd("embeddings", counts, settings) == pytest.approx(0.02)
    assert cost_usd("llm", counts, Settings()) == 0


def test_http_job_carries_usage(server: LLMTestServer, tmp_path: Path) -> None:
    """`GET /api/v1/jobs/{id}` has the llm and embeddings totals."""
    rt = Runtime(Settings(home=tmp_path / "home", **llm_settings(server), **PRICES))
    with TestClient(create_app(rt)) as client:
        response = client.post(
            "/api/v1/datasets/usage/data",
            json={"documents": [{"name": "a.txt", "text": TEXTS["doc2.txt"]}]},
        )
        assert response.status_code == 200, response.text
        accepted = client.post("/api/v1/datasets/usage/cognify", json={"all": False}).json()
        job = http_finished(client, accepted["job_id"])
    assert job["llm"]["calls"] == served(server, "chat/completions")["calls"] > 0
    assert job["llm"]["prompt_tokens"] == served(server, "chat/completions")["prompt_tokens"]
    assert job["embeddings"]["calls"] == served(server, "embeddings")["calls"]
    assert job["llm"]["cost_usd"] > 0 and set(job["llm"]) == {
        "calls",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cost_usd",
        "cache_hits",
    }
