"""Budgets: a job whose LLM calls would go over its budget pauses with what it did
stored and nothing errored; a resume finishes it with the graph and the LLM calls of a run
that never paused. Embedded (SQLite state) and Neo4j + Redis, on worker threads."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services import jobs
from api.services.add import add_files as add_service
from api.services.cognify import cognify as start_cognify
from api.services.datasets import JobRunningError
from api.services.delete import delete_dataset
from api.services.export import graph_pages
from api.services.tenants import TenantError, Tenants
from core.access import LOCAL, Caller, Role
from core.llm.usage import BudgetExceeded
from core.models.documents import STATUS, DocumentStatus
from core.models.jobs import Budget, Claim, Job, JobStatus
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
from workers.budgets import JobNotResumableError
from workers.celery_app import configure
from workers.jobs import JobTracker
from workers.sweeper import sweep
from workers.usage import JobBudget

# Eight documents of three paragraphs: three chunks, three extractions and a summary each.
TEXTS = {
    f"doc{i}.txt": "\n\n".join(
        f"Person{i}x{k} Smith founded Company{i}x{k} Labs in City{k}. Person{i}x{k} Smith "
        f"works for Company{i}x{k} Labs. The work appeared in Journal{k}."
        for k in range(3)
    )
    for i in range(8)
}
CONCURRENCY = 4  # LLM requests in flight per process: the most a pause can find running
SETTINGS: dict[str, Any] = {
    "batch_size": 1,
    "chunk_tokens": 40,
    "llm_concurrency": CONCURRENCY,
    "llm_price_input_per_mtok": 0.15,
    "llm_price_output_per_mtok": 0.6,
    # Replies here are a few hundred tokens; each request sets this much aside in a budget.
    "llm_max_completion_tokens": 1024,
}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(latency_ms=30) as server:
        yield server


def graph_ids(rt: Runtime, dataset: str) -> tuple[set[str], set[str]]:
    """The dataset's node ids and edge ids."""
    nodes: set[str] = set()
    edges: set[str] = set()
    for page in graph_pages(rt.graph, dataset):
        nodes.update(node.id for node in page.nodes)
        edges.update(edge.id for edge in page.edges)
    return nodes, edges


def statuses(rt: Runtime, dataset: str) -> dict[str, str]:
    return {doc.name: str(doc.properties.get(STATUS)) for doc in rt.catalog.documents(dataset)}


@pytest.mark.slow
def test_budget_pauses_and_resume_finishes_like_an_unbudgeted_run(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    files = write_files(tmp_path / "docs", TEXTS)
    dataset = backend.dataset("budget")
    settings = {**llm_settings(server), **SETTINGS}

    # The reference: the same corpus, same dataset name, no budget (another model name, so
    # the budgeted run below finds nothing in the LLM cache; a home of its own).
    reference = {**settings, "llm_model": "reference", "home": tmp_path / "reference"}
    with backend.runtime(threads=2, **reference) as rt:
        assert not add_files(rt, dataset, files).rejected
        job = succeeded(rt, start_cognify(rt, dataset))
        expected_graph = graph_ids(rt, dataset)
        expected = jobs.show(rt, job.id)
    reference_calls = server.calls()
    assert reference_calls == expected.llm.calls >= len(TEXTS) * 4, expected.llm
    total_tokens = expected.spent.tokens
    assert expected_graph[0] and expected_graph[1]

    with backend.runtime(threads=2, **settings) as rt:
        assert not add_files(rt, dataset, files).rejected
        budget = total_tokens // 2
        job = start_cognify(rt, dataset, budget_tokens=budget)
        paused = finished(rt, job, 120)
        assert paused.status is JobStatus.PAUSED_BUDGET, paused
        assert paused.budget == Budget(tokens=budget)
        assert not paused.errors, paused.errors  # refused work is no document's fault
        report = jobs.show(rt, job.id)
        # Every request set the most it can use aside before it was sent: never past the
        # budget, and it stops once the next request does not fit beside those in flight.
        assert report.spent.tokens <= budget, report.spent
        assert report.spent.tokens >= budget // 4, report.spent  # it did spend its budget
        assert report.llm.calls == server.calls() - reference_calls
        states = statuses(rt, dataset)
        processed = [n for n, s in states.items() if s == DocumentStatus.PROCESSED]
        untouched = [n for n, s in states.items() if s == DocumentStatus.ADDED]
        assert processed and untouched, states
        assert len(processed) + len(untouched) == len(TEXTS), states  # none failed
        assert report.counts["documents"] == len(processed)
        assert JobTracker(rt.state).parked(job.id), "the unfinished batches wait"
        # A watcher of the paused job is told so and stops.
        seen = [e for e in jobs.watch(rt, job.id, poll=0.05) if e is not None]
        assert {"batch_paused", "paused"} <= {e.kind for e in seen}, [e.kind for e in seen]
        assert seen[-1].kind == "finished" and seen[-1].data["status"] == "paused_budget"

        # A resume with a budget already spent is refused; a larger one finishes the job.
        with pytest.raises(ValueError, match="already spent"):
            jobs.resume(rt, job.id, tokens=report.spent.tokens)
        resumed = jobs.resume(rt, job.id, tokens=total_tokens * 3)
        assert resumed.status is JobStatus.RUNNING
        done = succeeded(rt, resumed, 120)
        assert done.counts["documents"] == len(TEXTS)
        assert set(statuses(rt, dataset).values()) == {DocumentStatus.PROCESSED}
        final = jobs.show(rt, job.id)
        assert graph_ids(rt, dataset) == expected_graph
        # Watched from its start, the resumed job passes its pause and ends at its success.
        seen = [e for e in jobs.watch(rt, job.id, poll=0.05) if e is not None]
        kinds = [e.kind for e in seen]
        assert kinds.index("paused") < kinds.index("resumed") < len(kinds) - 1, kinds
        assert seen[-1].kind == "finished" and seen[-1].data["status"] == "succeeded"
        # Nothing was asked twice: both runs together made the unbudgeted run's calls.
        assert server.calls() - reference_calls == reference_calls
        assert final.llm.calls == expected.llm.calls
        assert final.spent.tokens == expected.spent.tokens
        # The finalisation drops the kept artifacts right after it stored the status.
        deadline = time.monotonic() + 30
        while rt.state.keys(f"job:{job.id}:artifact:") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not rt.state.keys(f"job:{job.id}:artifact:"), "cleaned up at the end"
        with pytest.raises(JobNotResumableError, match="succeeded"):
            jobs.resume(rt, job.id)


@pytest.mark.slow
@embedded_only
def test_http_budget_resume_and_refusals(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    """The API takes a budget with cognify, shows it with the job, resumes a paused job (202)
    and answers 409 for a job that is not paused; a cancelled paused job stays cancelled."""
    settings = Settings(home=tmp_path / "home", **llm_settings(server), **SETTINGS)
    rt = Runtime(settings)
    with TestClient(create_app(rt)) as client:
        docs = [{"name": name, "text": text} for name, text in list(TEXTS.items())[:4]]
        response = client.post("/api/v1/datasets/api/data", json={"documents": docs})
        assert response.status_code == 200, response.text

        bad = client.post("/api/v1/datasets/api/cognify", json={"budget_usd": -1})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"
        # Room for one request at a time (its prompt's bound and 1,024 tokens of reply).
        accepted = client.post("/api/v1/datasets/api/cognify", json={"budget_tokens": 6000})
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        paused = http_finished(client, job_id)
        assert paused["status"] == "paused_budget", paused
        assert paused["budget"] == {"usd": None, "tokens": 6000}
        assert 0 < paused["spent"]["tokens"] <= 6000
        assert (
            paused["spent"]["tokens"]
            == paused["llm"]["prompt_tokens"] + paused["llm"]["completion_tokens"]
        )
        assert "jobs resume" in paused["message"]

        spent = client.post(f"/api/v1/jobs/{job_id}/resume", json={"budget_tokens": 1})
        assert spent.status_code == 422 and "already spent" in spent.text
        resumed = client.post(f"/api/v1/jobs/{job_id}/resume", json={"budget_usd": 10})
        assert resumed.status_code == 202, resumed.text
        assert resumed.json()["budget"] == {"usd": 10.0, "tokens": None}
        done = http_finished(client, job_id)
        assert done["status"] == "succeeded" and not done["errors"], done
        again = client.post(f"/api/v1/jobs/{job_id}/resume")
        assert again.status_code == 409, again.text
        assert again.json()["error"]["code"] == "job_not_resumable"
        assert client.post("/api/v1/jobs/nope/resume").status_code == 404

        # Cancelling a paused job ends it; it cannot be resumed then.
        response = client.post(
            "/api/v1/datasets/other/data",
            json={"documents": [{"name": n, "text": t} for n, t in list(TEXTS.items())[4:]]},
        )
        assert response.status_code == 200, response.text
        job_id = client.post("/api/v1/datasets/other/cognify", json={"budget_tokens": 2500}).json()[
            "job_id"
        ]
        assert http_finished(client, job_id)["status"] == "paused_budget"
        cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel").json()
        assert cancelled["status"] == "cancelled", cancelled
        refused = client.post(f"/api/v1/jobs/{job_id}/resume")
        assert refused.status_code == 409 and "cancelled" in refused.text


@embedded_only
def test_a_dollar_budget_needs_prices(backend: Backend, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="LLM prices"):
        jobs.budget_of(Settings(home=tmp_path), usd=1.0)
    assert jobs.budget_of(Settings(home=tmp_path), tokens=5) == Budget(tokens=5)


def test_concurrent_reservations_never_commit_past_the_cap(backend: Backend) -> None:
    """Threads reserving against one budget at once: what is committed never exceeds the cap
    (one atomic increment per reservation), and every refusal committed nothing."""
    with backend.runtime(threads=1) as rt:
        budget = JobBudget(rt.state, "concurrent", Budget(tokens=1000), rt.settings)
        granted: list[int] = []
        lock = threading.Lock()

        def reserve_many() -> None:
            for _ in range(40):
                try:
                    budget.reserve(7, 3)
                except BudgetExceeded:
                    continue
                with lock:
                    granted.append(10)

        threads = [threading.Thread(target=reserve_many) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        committed = int(rt.state.get("job:concurrent:budget:tokens") or 0)
        assert committed == sum(granted) <= 1000
        assert len(granted) >= 90, len(granted)  # refusals start only near the cap


@pytest.mark.slow
@embedded_only
def test_cli_budget_pause_show_and_resume(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    """`cognify --budget-tokens` ends paused (exit 1, the resume command named), `jobs show`
    has the budget and what was spent, `jobs resume` finishes it (exit 0)."""
    from typer.testing import CliRunner

    from api.cli import app

    folder = tmp_path / "docs"
    write_files(folder, dict(list(TEXTS.items())[:3]))
    env = {
        "COGMILL_HOME": str(tmp_path / "home"),
        **{f"COGMILL_{k.upper()}": str(v) for k, v in {**llm_settings(server), **SETTINGS}.items()},
    }
    runner = CliRunner()

    def cli(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args), env=env)
        return result.exit_code, result.output

    assert cli("add", str(folder), "--dataset", "cli")[0] == 0
    code, output = cli("cognify", "cli", "--budget-tokens", "6000")
    assert code == 1 and "paused_budget" in output and "jobs resume" in output, output
    job_id = re.search(r"^job (\w+): ", output, re.MULTILINE)[1]  # the result line
    code, output = cli("jobs", "show", job_id)
    shown = json.loads(output)
    assert shown["status"] == "paused_budget" and shown["budget"]["tokens"] == 6000, shown
    assert shown["spent"]["tokens"] > 0 and shown["spent"]["usd"] > 0, shown
    code, output = cli("jobs", "resume", job_id, "--budget-tokens", "1")
    assert code == 2 and "already spent" in output, output
    code, output = cli("jobs", "resume", job_id, "--budget-usd", "5")
    assert code == 0 and "succeeded" in output and "of $5" in output, output
    code, output = cli("jobs", "resume", job_id)
    assert code == 1 and "only a job paused by its budget" in output, output


@embedded_only
def test_resume_waits_for_other_jobs_and_refuses_a_deleted_dataset(
    backend: Backend, server: LLMTestServer, tmp_path: Path
) -> None:
    """A paused job does not resume beside another job on its dataset (their writes would
    race), nor into a dataset deleted meanwhile."""
    with backend.runtime(threads=2, **llm_settings(server), **SETTINGS) as rt:
        dataset = backend.dataset("busy")
        write_files(tmp_path / "docs", dict(list(TEXTS.items())[:3]))
        assert not add_files(rt, dataset, sorted((tmp_path / "docs").iterdir())).rejected
        paused = finished(rt, start_cognify(rt, dataset, budget_tokens=2500))
        assert paused.status is JobStatus.PAUSED_BUDGET, paused
        tracker = JobTracker(rt.state)
        other = Job(
            id="other",
            dataset=dataset,
            pipeline="default",
            pipeline_version="2",
            status=JobStatus.RUNNING,
        )
        tracker.save(other)
        with pytest.raises(JobRunningError):
            jobs.resume(rt, paused.id)
        tracker.save(other.model_copy(update={"status": JobStatus.CANCELLED}))
        delete_dataset(rt, dataset)
        with pytest.raises(JobNotResumableError, match="deleted"):
            jobs.resume(rt, paused.id)
        assert tracker.get(paused.id).status is JobStatus.PAUSED_BUDGET


@embedded_only
def test_the_sweeper_leaves_parked_batches_alone(backend: Backend, tmp_path: Path) -> None:
    """A parked batch's claim names a worker that no longer lists it (its step ended): the
    sweeper must not take it for a dead worker's nor resume it with a stalled job's batches;
    a dead worker's batch beside it is republished as ever."""
    settings = Settings(home=tmp_path / "home", batch_size=1)
    with installed_runtime(settings) as rt:
        app = configure(rt.settings)
        app.control.purge()
        write_files(tmp_path / "docs", dict(list(TEXTS.items())[:3]))
        assert not add_files(rt, "swept", sorted((tmp_path / "docs").iterdir())).rejected
        job = start_cognify(rt, "swept")
        app.control.purge()  # no worker: the chains are gone, nothing runs
        tracker = JobTracker(rt.state)
        now, period = time.time(), rt.settings.worker_heartbeat_seconds
        for batch in (0, 1):  # both claimed by a worker that is gone
            step = "extract_graph"
            tracker.claim(job.id, batch, Claim(step=step, worker="gone:1", gen=0, at=now))
        tracker.park(job.id, 0, "extract_graph")
        assert sweep(rt, app, stall_seconds=3600, now=now) == 0
        assert sweep(rt, app, stall_seconds=3600, now=now + period) == 1  # batch 1 only
        app.control.purge()
        assert sweep(rt, app, stall_seconds=60, now=now + 1000) == 2  # stalled: 1 and 2
        kinds = ("batch_recovered", "batch_resumed")
        touched = [e["batch"] for _, e in tracker.events(job.id) if e["event"] in kinds]
        assert sorted(touched) == [1, 1, 2], touched
        assert tracker.generation(job.id, 0) == 0 and tracker.parked(job.id) == {0}


@embedded_only
def test_a_tenant_budget_is_the_default_of_its_jobs(backend: Backend, tmp_path: Path) -> None:
    """A job started without a budget gets its tenant's (`cogmill tenants budget`), else the
    `job_budget_usd` setting; one given with the job wins."""
    paths = write_files(tmp_path / "docs", dict(list(TEXTS.items())[:1]))
    settings = {**SETTINGS, "job_budget_usd": 0.5}
    with installed_runtime(backend.settings(**settings)) as rt:  # no worker: jobs stay queued
        tenants = Tenants(rt.state)
        tenants.create_tenant("acme")
        tenants.create_tenant("globex")
        tenants.set_budget("acme", 0.02)
        acme, globex = Caller("acme", Role.WRITER), Caller("globex", Role.WRITER)
        for caller in (acme, globex, LOCAL):
            added = add_service(rt, "docs", [(p.name, p) for p in paths], caller=caller)
            assert added.stored == 1, added
        assert start_cognify(rt, "docs", caller=acme).budget == Budget(usd=0.02)
        assert start_cognify(rt, "docs", caller=globex).budget == Budget(usd=0.5)
        assert start_cognify(rt, "docs").budget == Budget(usd=0.5)
        given = start_cognify(rt, "docs", caller=acme, everything=True, budget_tokens=99)
        assert given.budget == Budget(tokens=99)
        with pytest.raises(TenantError, match="more than 0"):
            tenants.set_budget("acme", 0)
        assert tenants.set_budget("acme", None).budget_usd is None
