"""The per-tenant cap on batches in flight (workers/fairness.py): taken atomically on every
state store, applied only while another tenant waits, and always given back: on a failed
batch, and once only when a killed worker's first step is delivered again."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from core.models.jobs import Budget, Job, JobStatus
from core.settings import Settings
from runtime import Runtime
from tests.backends import Backend, add_files, finished, llm_settings
from tests.llm_server import LLMTestServer
from workers import fairness
from workers.jobs import JobTracker
from workers.orchestration import cognify, run_job

CAP = Settings(_env_file=None, tenant_batches_in_flight=2)  # type: ignore[call-arg]


def test_cap_holds_only_while_another_tenant_waits(tracker: JobTracker) -> None:
    state, a, b = tracker.state, f"a{uuid.uuid4().hex[:6]}:docs", f"b{uuid.uuid4().hex[:6]}:docs"
    fairness.queued(state, CAP, a, "job-a", range(3))
    assert [fairness.admit(state, CAP, a, "job-a", i) for i in range(3)] == [True] * 3
    assert fairness.in_flight(state, a) == 3  # alone, a tenant is not capped
    for i in range(3):
        fairness.release(state, a, "job-a", i)
    fairness.queued(state, CAP, b, "job-b", [0])
    fairness.queued(state, CAP, a, "job-a2", range(4))
    assert fairness.others_waiting(state, fairness.tenant_of(a))
    admitted = [fairness.admit(state, CAP, a, "job-a2", i) for i in range(4)]
    assert admitted == [True, True, False, False] and fairness.in_flight(state, a) == 2
    assert fairness.admit(state, CAP, b, "job-b", 0)  # b under its own cap: b no longer waits
    assert not fairness.others_waiting(state, fairness.tenant_of(a))
    assert fairness.admit(state, CAP, a, "job-a2", 2) and fairness.in_flight(state, a) == 3


def test_a_redelivered_first_step_keeps_its_one_slot(tracker: JobTracker) -> None:
    state, a, b = tracker.state, f"a{uuid.uuid4().hex[:6]}:docs", f"b{uuid.uuid4().hex[:6]}:docs"
    fairness.queued(state, CAP, b, "job-b", [0])
    assert fairness.admit(state, CAP, a, "job", 0)
    assert fairness.admit(state, CAP, a, "job", 0)  # the message again, its worker killed
    assert fairness.in_flight(state, a) == 1
    fairness.release(state, a, "job", 0)
    fairness.release(state, a, "job", 0)  # a second recording gives back nothing
    assert fairness.in_flight(state, a) == 0
    assert fairness.admit(state, CAP, a, "job", 1) and fairness.in_flight(state, a) == 1


def _job(rt: Runtime, dataset: str) -> Job:
    return Job(
        id=uuid.uuid4().hex,
        dataset=dataset,
        pipeline="default",
        pipeline_version="",
        mode="changed",
        status=JobStatus.RUNNING,
    )


@pytest.mark.slow
def test_slots_are_released_on_failure_and_after_a_redelivery(
    backend: Backend, models: dict[str, object], tmp_path: Path
) -> None:
    """Real batches on worker threads: one whose documents fail (a PDF that is not one), one
    whose first step a killed worker had admitted before its message came again."""
    dataset, other = f"t{uuid.uuid4().hex[:6]}:docs", f"o{uuid.uuid4().hex[:6]}:docs"
    bad, good = tmp_path / "bad.pdf", tmp_path / "good.txt"
    bad.write_bytes(b"%PDF-1.4 not really a pdf")
    good.write_text("Ada Lovelace met Charles Babbage in London.", encoding="utf-8")
    with backend.runtime(models, batch_size=1, tenant_batches_in_flight=1) as rt:
        fairness.queued(rt.state, rt.settings, other, "o", range(5))  # waits throughout
        add_files(rt, dataset, [bad])
        done = finished(rt, run_job(rt, _job(rt, dataset)), 120)
        assert done.errors and done.counts.get("documents", 0) == 0, done
        assert fairness.in_flight(rt.state, dataset) == 0  # a leaked slot would block the next

        dataset = dataset + "2"  # the same tenant, without the failed document
        add_files(rt, dataset, [good])
        job = _job(rt, dataset)
        # A worker took batch 0's first step, admitted it and was killed; the broker delivers
        # the same message again, which must run (not wait for its own slot) and release it.
        assert fairness.admit(rt.state, rt.settings, dataset, job.id, 0)
        done = finished(rt, run_job(rt, job), 120)
        assert done.status is JobStatus.SUCCEEDED and not done.errors, done
        assert fairness.in_flight(rt.state, dataset) == 0


@pytest.mark.slow
def test_a_capped_tenants_batches_wait_their_turn_and_all_run(
    backend: Backend, models: dict[str, object], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Four batches under a cap of one, another tenant waiting throughout: the batches over the
    cap go back to the queue and come again, one runs at a time, and the job ends whole."""
    dataset, other = f"t{uuid.uuid4().hex[:6]}:docs", f"o{uuid.uuid4().hex[:6]}:docs"
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"note{i}.txt")
        paths[-1].write_text(f"Note {i}: Ada Lovelace met Charles Babbage.", encoding="utf-8")
    seen: list[int] = []
    caplog.set_level(logging.INFO, logger="cogmill.tasks")
    with backend.runtime(models, batch_size=1, tenant_batches_in_flight=1) as rt:
        fairness.queued(rt.state, rt.settings, other, "o", range(5))  # waits throughout
        add_files(rt, dataset, paths)
        job = run_job(rt, _job(rt, dataset))

        def look(_: Job | None) -> None:
            seen.append(fairness.in_flight(rt.state, dataset))

        done = finished(rt, job, 120, on_tick=look)
        assert done.status is JobStatus.SUCCEEDED and not done.errors, done
        assert done.counts["documents"] == 4
        assert max(seen) == 1 and fairness.in_flight(rt.state, dataset) == 0
    assert any("batch_deferred" in r.getMessage() for r in caplog.records)


def test_batches_parked_by_the_budget_give_back_their_slots(
    backend: Backend, tmp_path: Path
) -> None:
    """A parked batch runs on no worker: its slot goes back (else its tenant stays capped)."""
    dataset, other = f"t{uuid.uuid4().hex[:6]}:docs", f"o{uuid.uuid4().hex[:6]}:docs"
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"memo{i}.txt")
        paths[-1].write_text(f"Memo {i}: Person{i} Smith founded Company{i} Labs.", "utf-8")
    with (
        LLMTestServer() as server,
        backend.runtime(
            threads=2, batch_size=1, tenant_batches_in_flight=3, **llm_settings(server)
        ) as rt,
    ):
        fairness.queued(rt.state, rt.settings, other, "o", range(5))  # waits throughout
        add_files(rt, dataset, paths)
        paused = finished(rt, cognify(rt, dataset, budget=Budget(tokens=50)), 120)
        assert paused.status is JobStatus.PAUSED_BUDGET, paused
        assert fairness.in_flight(rt.state, dataset) == 0


@pytest.mark.slow
def test_a_cancelled_jobs_batches_leave_no_slot_and_nothing_waiting(
    backend: Backend, models: dict[str, object], tmp_path: Path
) -> None:
    dataset, other = f"t{uuid.uuid4().hex[:6]}:docs", f"o{uuid.uuid4().hex[:6]}:docs"
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"note{i}.txt")
        paths[-1].write_text(f"Note {i}: Ada Lovelace met Charles Babbage.", encoding="utf-8")
    with backend.runtime(models, batch_size=1, tenant_batches_in_flight=1) as rt:
        fairness.queued(rt.state, rt.settings, other, "o", range(5))  # waits throughout
        add_files(rt, dataset, paths)
        job = run_job(rt, _job(rt, dataset))
        JobTracker(rt.state).cancel(job.id)
        done = finished(rt, job, 120)
        assert done.status is JobStatus.CANCELLED, done
        assert fairness.in_flight(rt.state, dataset) == 0
        # Only the other tenant's five batches still wait: the cancelled ones count no more.
        assert not fairness.others_waiting(rt.state, fairness.tenant_of(other))
