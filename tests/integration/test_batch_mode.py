"""Batch API mode: a job's LLM steps go through the test server's Files + Batches
API, the chains wait parked (no worker thread busy), and the job ends with the graph of a sync
run of the same corpus. Failed lines and expired batches go the normal synchronous way.
Embedded (SQLite state, the embedded worker's poller) and Neo4j + Redis on worker threads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.worker import state as worker_state
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli
from api.http.app import create_app
from api.services import jobs
from api.services.cognify import cognify as start_cognify
from api.services.export import graph_pages
from core.llm.cache import LLMCache, cache_key
from core.llm.deferral import Deferred
from core.llm.schemas import schema_of
from core.models.extraction import KnowledgeGraph
from core.models.jobs import Job, JobStatus
from core.settings import Settings
from runtime import Runtime
from tests.backends import (
    Backend,
    add_files,
    embedded_only,
    finished,
    http_finished,
    installed_runtime,
    llm_settings,
    succeeded,
    write_files,
)
from tests.llm_server import LLMTestServer
from workers.jobs import JobTracker
from workers.llm_batches.polling import poll
from workers.llm_batches.records import (
    CLAIM_METADATA,
    PENDING,
    Submission,
    batch_api,
    batch_usage,
    load,
    save,
)

# Four documents of three paragraphs: several chunks each, so every batch of two documents
# asks for extractions and then for document summaries (two submissions per batch).
TEXTS = {
    f"doc{i}.txt": "\n\n".join(
        f"Person{i}x{k} Smith founded Company{i}x{k} Labs in City{k}. Person{i}x{k} Smith "
        f"works for Company{i}x{k} Labs. The work appeared in Journal{k} in {1950 + k}."
        for k in range(3)
    )
    for i in range(4)
}
SETTINGS: dict[str, Any] = {"batch_size": 2, "chunk_tokens": 40, "llm_batch_poll_seconds": 0.2}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def graph_ids(rt: Runtime, dataset: str) -> tuple[set[str], set[str]]:
    nodes: set[str] = set()
    edges: set[str] = set()
    for page in graph_pages(rt.graph, dataset):
        nodes.update(node.id for node in page.nodes)
        edges.update(edge.id for edge in page.edges)
    return nodes, edges


def kinds(rt: Runtime, job: Job) -> list[str]:
    return [event["event"] for _, event in JobTracker(rt.state).events(job.id)]


def reference_run(
    backend: Backend,
    server: LLMTestServer,
    dataset: str,
    files: list[Path],
    home: Path,
    pipeline: str | None,
) -> tuple[tuple[set[str], set[str]], Any]:
    """The graph and usage of a sync run (another model name: nothing cached for the next)."""
    settings = {**llm_settings(server), **SETTINGS, "llm_model": "reference", "home": home}
    with backend.runtime(**settings) as rt:
        assert not add_files(rt, dataset, files).rejected
        job = succeeded(rt, start_cognify(rt, dataset, pipeline=pipeline))
        return graph_ids(rt, dataset), jobs.show(rt, job.id).llm


def parked(rt: Runtime, server: LLMTestServer, job: Job, timeout: float = 60) -> None:
    """Wait until every batch of the job waits for the Batch API, the server holds a batch
    of each in progress, and no worker thread of this process runs a task; fails when that
    does not happen while the server's batches are pending."""
    tracker, deadline = JobTracker(rt.state), time.monotonic() + timeout
    while True:
        waiting = tracker.llm_waiting(job.id) == set(range(job.total_batches))
        pending = server.batches.stats()["pending"]
        active = [(r.name, r.kwargs.get("batch")) for r in worker_state.active_requests]
        if waiting and pending == job.total_batches and not active:
            return
        assert time.monotonic() < deadline, (waiting, pending, active, kinds(rt, job))
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["answered", "failed_lines", "expired", "temporal"])
def test_batch_mode_builds_the_sync_runs_graph(
    backend: Backend, server: LLMTestServer, tmp_path: Path, scenario: str
) -> None:
    files = write_files(tmp_path / "docs", TEXTS)
    dataset = backend.dataset("batch")
    # The temporal pipeline adds a third LLM step (events) and so a third file per batch.
    pipeline, steps = ("temporal", 3) if scenario == "temporal" else (None, 2)
    expected_graph, expected_llm = reference_run(
        backend, server, dataset, files, tmp_path / "reference", pipeline
    )
    assert expected_graph[0] and expected_graph[1]
    reference_calls = server.calls()
    batches = server.batches
    batches.configure(
        hold=True,  # until every batch is seen parked
        failed_share=0.2 if scenario == "failed_lines" else 0.0,
        expire=scenario == "expired",
    )

    with backend.runtime(**llm_settings(server), **SETTINGS) as rt:
        assert not add_files(rt, dataset, files).rejected
        job = start_cognify(rt, dataset, llm_mode="batch", pipeline=pipeline)
        assert job.options["llm_mode"] == "batch"
        # Parked, not blocked: no worker thread holds a task while the server's batches wait.
        parked(rt, server, job)
        assert JobTracker(rt.state).get(job.id).status is JobStatus.RUNNING
        assert server.calls() == reference_calls, "nothing was sent synchronously"
        batches.configure(hold=False)

        done = succeeded(rt, job, 120)
        assert graph_ids(rt, dataset) == expected_graph
        stats, events = batches.stats(), kinds(rt, job)
        # One file per step-batch (extractions, summaries, events), each submitted once.
        assert stats["submissions"] == steps * job.total_batches, stats
        assert events.count("llm_batch_submitted") == stats["submissions"], events
        assert events.count("llm_batch_done") == stats["submissions"], events
        sync_calls = server.calls() - reference_calls
        if scenario in ("answered", "temporal"):
            assert sync_calls == 0 and not stats["failed"], stats
        elif scenario == "failed_lines":
            assert stats["failed"] and stats["answered"], stats
            assert sync_calls == len(stats["failed"]), (sync_calls, stats)  # exactly those
        else:
            assert stats["answered"] == 0 and sync_calls == stats["lines"], (sync_calls, stats)
        # Every call counted once, batch or not, with the sync run's tokens.
        llm = jobs.show(rt, done.id).llm
        assert llm.calls == expected_llm.calls == stats["answered"] + sync_calls, llm
        assert llm.prompt_tokens == expected_llm.prompt_tokens, (llm, expected_llm)
        assert llm.cache_hits == 0, llm
        assert batch_usage(rt, done.id)["calls"] == stats["answered"]


@pytest.mark.slow
@embedded_only
def test_http_and_refusals(backend: Backend, server: LLMTestServer, tmp_path: Path) -> None:
    """`llm_mode` in the cognify body is stored with the job; a bad mode is a 422, and so is
    batch mode without an LLM endpoint."""
    settings = Settings(home=tmp_path / "home", **llm_settings(server), **SETTINGS)
    server.batches.configure(delay_seconds=0.5)
    rt = Runtime(settings)
    with TestClient(create_app(rt)) as client:
        docs = [{"name": name, "text": text} for name, text in list(TEXTS.items())[:2]]
        response = client.post("/api/v1/datasets/api/data", json={"documents": docs})
        assert response.status_code == 200, response.text
        url = "/api/v1/datasets/api/cognify"
        bad = client.post(url, json={"llm_mode": "later"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"
        accepted = client.post(url, json={"llm_mode": "batch"})
        assert accepted.status_code == 202, accepted.text
        done = http_finished(client, accepted.json()["job_id"])
        assert done["status"] == "succeeded", done
        assert done["llm"]["calls"] == server.batches.stats()["answered"] > 0, done
        assert server.calls() == 0
    offline = Runtime(Settings(home=tmp_path / "offline"))
    with pytest.raises(ValueError, match="COGMILL_LLM_BASE_URL"):
        start_cognify(offline, "api", llm_mode="batch")


@embedded_only
@pytest.mark.slow  # waits out the batch's 1 s turnaround
def test_a_batch_whose_submitter_died_is_found_not_sent_again(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    """A worker that died after creating the batch and before recording its id: the poller
    finds the batch by its claim in the metadata and takes its answers; a claim with no batch
    after the grace is given up (its step runs again, synchronously)."""
    settings = Settings(
        home=tmp_path / "home", **llm_settings(server), llm_batch_claim_grace_seconds=0.5
    )
    server.batches.configure(delay_seconds=1.0)
    with installed_runtime(settings) as rt:
        schema = schema_of(KnowledgeGraph)
        messages = [{"role": "user", "content": "Ada Lovelace met Charles Babbage."}]
        request = Deferred(
            cache_key("test", messages, schema), "test", messages, KnowledgeGraph, schema
        )
        died = Submission(
            job="j1",
            batch=0,
            step="extract_graph",
            gen=0,
            claim="claim-1",
            requests=1,
            claimed_at=time.time(),
        )
        never = died.model_copy(update={"batch": 1, "claim": "claim-2"})
        for record in (died, never):
            save(rt, record)
            rt.state.add_member(PENDING, record.member)
        api = batch_api(rt)
        created = api.submit([request], {CLAIM_METADATA: "claim-1"})  # then the worker died
        assert poll(rt, api) == 0  # found and recorded; the other is within its grace
        found = load(rt, "j1", 0, "extract_graph")
        assert found is not None and found.state == "pending", found
        assert found.openai_batch == created.id
        time.sleep(1.1)
        assert poll(rt, api) == 0  # answered, lost: both settled (no job to re-publish)
        api.close()
        assert server.batches.stats()["submissions"] == 1, "never submitted again"
        done, lost = load(rt, "j1", 0, "extract_graph"), load(rt, "j1", 1, "extract_graph")
        assert done is not None and (done.state, done.outcome, done.answered) == (
            "done",
            "completed",
            1,
        )
        assert lost is not None and (lost.state, lost.outcome) == ("done", "lost")
        cached = LLMCache(rt.state).get(request.key)
        assert cached is not None and KnowledgeGraph.model_validate_json(cached).entities
        assert not rt.state.add_members({PENDING: []})[PENDING]


@embedded_only
def test_an_endpoint_without_a_batch_api_runs_the_steps_as_usual(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    """A server that refuses the upload (a local model's): each step runs synchronously in
    the same delivery, once, and the job succeeds with every request sent one by one."""
    server.batches.configure(refuse=True)
    with backend.runtime(**llm_settings(server), **SETTINGS) as rt:
        files = write_files(tmp_path / "docs", dict(list(TEXTS.items())[:2]))
        assert not add_files(rt, "local", files).rejected
        job = succeeded(rt, start_cognify(rt, "local", llm_mode="batch"))
        events = [e for _, e in JobTracker(rt.state).events(job.id)]
        refused = [e for e in events if e["event"] == "llm_batch_done"]
        assert [e["status"] for e in refused] == ["refused", "refused"], events
        assert not [e for e in events if e["event"] == "llm_batch_answered"], events
        assert server.batches.stats()["submissions"] == 0
        assert jobs.show(rt, job.id).llm.calls == server.calls() > 0


@pytest.mark.slow
@embedded_only
def test_cancel_while_batches_pend(backend: Backend, server: LLMTestServer, tmp_path: Path) -> None:
    """A job cancelled while its batches wait ends cancelled at the next poll, and its
    batches are cancelled on the endpoint (nothing more is answered or paid)."""
    server.batches.configure(delay_seconds=600)
    with backend.runtime(**llm_settings(server), **SETTINGS) as rt:
        files = write_files(tmp_path / "docs", TEXTS)
        assert not add_files(rt, "cancel", files).rejected
        job = start_cognify(rt, "cancel", llm_mode="batch")
        parked(rt, server, job)
        jobs.cancel(rt, job.id)
        ended = finished(rt, job, 60)
        assert ended.status is JobStatus.CANCELLED, ended
        assert server.batches.stats()["cancelled"] == job.total_batches
        assert server.calls() == 0


@pytest.mark.slow
@embedded_only
def test_cli_flag(backend: Backend, server: LLMTestServer, tmp_path: Path) -> None:
    """`cogmill cognify D --llm-mode batch` waits for the batches and ends like a sync run;
    an unknown mode is refused with what to use."""
    env = {f"COGMILL_{k.upper()}": str(v) for k, v in {**llm_settings(server), **SETTINGS}.items()}
    env["COGMILL_HOME"] = str(tmp_path / "home")
    runner = CliRunner()
    files = write_files(tmp_path / "docs", dict(list(TEXTS.items())[:2]))
    added = runner.invoke(cli, ["add", str(files[0].parent), "--dataset", "cli"], env=env)
    assert added.exit_code == 0, added.output
    bad = runner.invoke(cli, ["cognify", "cli", "--llm-mode", "later"], env=env)
    assert bad.exit_code != 0 and "use sync or batch" in bad.output, bad.output
    done = runner.invoke(cli, ["cognify", "cli", "--llm-mode", "batch"], env=env)
    assert done.exit_code == 0 and "succeeded" in done.output, done.output
    assert server.batches.stats()["submissions"] == 2 and server.calls() == 0


@pytest.mark.slow
@embedded_only
def test_a_budget_holds_in_batch_mode(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    """Each file is submitted only once the most its requests can use is reserved in the
    job's budget: twice the sync run's tokens pause the job (the reservations are above what
    the answers use) with nothing failed, and a resume ends it with the sync run's graph and
    calls."""
    files = write_files(tmp_path / "docs", TEXTS)
    expected_graph, expected_llm = reference_run(
        backend, server, "budget", files, tmp_path / "reference", None
    )
    spent = expected_llm.prompt_tokens + expected_llm.completion_tokens
    server.batches.configure(delay_seconds=0.5)
    # Replies here are under 2,048 tokens; each request reserves this much of reply.
    options = {**SETTINGS, "batch_size": 1, "llm_max_completion_tokens": 2048}
    with backend.runtime(**llm_settings(server), **options) as rt:
        assert not add_files(rt, "budget", files).rejected
        budget = spent * 2  # a submission of three requests reserves more than `spent`
        job = start_cognify(rt, "budget", llm_mode="batch", budget_tokens=budget)
        paused = finished(rt, job, 120)
        assert paused.status is JobStatus.PAUSED_BUDGET and not paused.errors, paused
        report = jobs.show(rt, job.id)
        # Reserved before submitting (the most the requests can use): never over.
        assert 0 < report.spent.tokens <= budget, (report.spent, spent)
        assert JobTracker(rt.state).parked(job.id)
        # A submission reserves all its requests at once, several submissions at a time.
        done = succeeded(rt, jobs.resume(rt, job.id, tokens=spent * 10), 120)
        assert graph_ids(rt, "budget") == expected_graph
        final = jobs.show(rt, done.id)
        assert final.llm.calls == expected_llm.calls and final.spent.tokens == spent, final
        assert server.calls() == expected_llm.calls, "nothing went synchronously"
