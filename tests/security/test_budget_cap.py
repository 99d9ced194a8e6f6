"""A job's LLM budget is a cap: what the endpoint counts never passes it.

`cognify --budget-tokens 8000` on 30 passages paused after 7 calls that had spent 10,876
tokens, 36% over: each request set aside its prompt at ~4 characters a token and the mean
completion so far, and replies ran longer. Each request now sets aside the most it can use
before it is sent: its prompt's bound and the max_tokens it is sent with (which the endpoint
enforces); the reply's usage settles the rest. Parallel requests together stay under the cap.

The test LLM server counts tokens as an endpoint does (the word-piece tokenizer over the
messages and the schema it is sent) and is the judge: its tally of every request is what was
spent. Embedded and Neo4j + Redis, on worker threads with several requests in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.services import jobs
from api.services.add import add_files
from api.services.cognify import cognify
from api.services.tenants import Tenants
from core.access import LOCAL, Caller, Role
from core.models.jobs import JobStatus
from tests.backends import Backend, finished, llm_settings, write_files
from tests.llm_server import LLMTestServer
from workers.usage import nano_usd

pytestmark = pytest.mark.integration

PASSAGES = 60
CONCURRENCY = 8
# Passages of one to five sentences: replies of different lengths, as real ones are.
TEXTS = {
    f"passage{i:02}.txt": " ".join(
        f"Person{i}x{k} Moreau founded Company{i}x{k} Works in City{k} in {1900 + i + k}. "
        f"Person{i}x{k} Moreau worked for Company{i}x{k} Works with Person{i}x{k + 1} Laine."
        for k in range(1 + i % 5)
    )
    for i in range(PASSAGES)
}
SETTINGS: dict[str, Any] = {
    # Ten documents a batch on two worker threads: up to 16 requests in flight.
    "batch_size": 10,
    "llm_concurrency": CONCURRENCY,
    "llm_price_input_per_mtok": 0.15,
    "llm_price_output_per_mtok": 0.6,
}
# (tokens of the job's own budget, dollars of its tenant's): the probe's budget, where every
# request is a large part of it, and larger ones, where many requests are in flight at once.
CAPS = {
    "8,000 tokens": (8_000, None),
    "100,000 tokens": (100_000, None),
    "tenant's $0.02": (None, 0.02),
}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=200, usage="wordpiece") as server:
        yield server


def spent(server: LLMTestServer) -> dict[str, int]:
    """What the endpoint counted over every chat request it answered."""
    return dict(server.stats()["usage"].get("/v1/chat/completions", {}))


@pytest.mark.slow
@pytest.mark.parametrize("cap", sorted(CAPS))
def test_parallel_requests_end_at_or_under_the_budget(
    backend: Backend, server: LLMTestServer, tmp_path: Path, cap: str
) -> None:
    tokens_cap, usd_cap = CAPS[cap]
    paths = write_files(tmp_path / "passages", TEXTS)
    dataset = backend.dataset("capped")
    with backend.runtime(threads=2, **llm_settings(server), **SETTINGS) as rt:
        caller = LOCAL
        if usd_cap is not None:  # the tenant's budget is the default of its jobs
            caller = Caller(f"t{backend.tag}", Role.WRITER)
            Tenants(rt.state).create_tenant(caller.tenant or "")
            Tenants(rt.state).set_budget(caller.tenant or "", usd_cap)
            backend.datasets.append(caller.scoped(dataset))
        added = add_files(rt, dataset, [(p.name, p) for p in paths], caller=caller)
        assert added.stored == PASSAGES
        job = cognify(rt, dataset, budget_tokens=tokens_cap, caller=caller)
        done = finished(rt, job, 600)
        report = jobs.show(rt, job.id)
    counted = spent(server)
    prompt, completion = counted.get("prompt_tokens", 0), counted.get("completion_tokens", 0)
    tokens, nano = prompt + completion, nano_usd(prompt, completion, 0, rt.settings)
    print(
        f"\n{cap}: {report.llm.calls} calls, {tokens} tokens ({completion} completion), "
        f"${nano / 1e9:.6f} counted by the endpoint, {report.counts.get('documents', 0)} "
        f"documents; {done.status.value}"
    )
    assert done.status is JobStatus.PAUSED_BUDGET, done  # the corpus needs more than the cap
    assert report.spent.tokens == tokens  # the job's own count is the endpoint's
    if tokens_cap is not None:
        assert tokens <= tokens_cap
    if usd_cap is not None:
        assert nano <= round(usd_cap * 1e9)
