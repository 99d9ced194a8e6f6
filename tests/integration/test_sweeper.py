"""Lost chains are resumed: a job whose messages vanished ends complete, from where it stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.jobs import Claim, JobStatus
from core.settings import Settings
from runtime import Runtime
from tests.backends import finished, installed_runtime
from tests.integration.test_jobs import add_sample, snapshot
from tests.services import redis_database_url
from workers.celery_app import FINISH, INGEST_QUEUE, configure, task_name
from workers.embedded import EmbeddedWorker
from workers.job_keys import batch_input_key, step_output_key
from workers.jobs import JobTracker
from workers.orchestration import cognify
from workers.sweeper import queued_messages, resume_point, sweep
from workers.tasks import STEP_TASKS


@pytest.fixture
def runtime(tmp_path: Path, models: dict[str, object]) -> Iterator[Runtime]:
    with installed_runtime(Settings(home=tmp_path / "home", batch_size=3), models) as rt:
        yield rt


def run_step(job_id: str, step: str, gen: int = 0) -> str | None:
    """Run `step` on batch 0 of a job on the sample in this thread, as its task would."""
    task = STEP_TASKS[step]
    return task.run(batch_input_key(job_id, 0), job_id, "sample", "default", 0, gen=gen)


@pytest.mark.slow
def test_a_job_whose_messages_were_lost_is_resumed_from_its_last_step(runtime: Runtime) -> None:
    app = configure(runtime.settings)
    app.control.purge()
    add_sample(runtime)
    job = cognify(runtime, "sample")  # no worker runs yet: the chains wait in the queues
    assert job.total_batches == 3 and queued_messages(app) == 3
    app.control.purge()  # ... and are lost, as when the broker drops them
    assert queued_messages(app) == 0
    # Batch 0 got one step further before the loss: its resume starts after that step.
    first = "classify"
    out = run_step(job.id, first)
    assert out == step_output_key(job.id, 0, first)
    tracker = JobTracker(runtime.state)
    source, remaining, in_key = resume_point(tracker, job.id, 0)
    assert source.pipeline == "default" and remaining[0] == "chunk" and in_key == out
    assert resume_point(tracker, job.id, 1)[1][0] == first

    now = time.time()
    assert sweep(runtime, app, stall_seconds=60, now=now) == 0, "progress is recent: not stalled"
    assert sweep(runtime, app, stall_seconds=60, now=now + 61) == 3
    assert queued_messages(app) == 3
    # Work waits in the queues now, so a second sweep must not resume the job again.
    assert sweep(runtime, app, stall_seconds=60, now=now + 200) == 0

    with EmbeddedWorker(app, threads=2):
        job = finished(runtime, job, 300)
    assert job.status is JobStatus.SUCCEEDED and job.counts["documents"] == 8, job
    # Batch 0's claim says its first step ended, yet nothing listed it: its hand-off was lost.
    kinds = ("batch_resumed", "batch_recovered")
    resumed = [(e["batch"], e["event"]) for _, e in tracker.events(job.id) if e["event"] in kinds]
    assert sorted(resumed) == [(0, "batch_recovered"), (1, "batch_resumed"), (2, "batch_resumed")]
    # The resumed job wrote what an undisturbed one writes.
    lost = snapshot(runtime)
    runtime.catalog.remove_dataset("sample")
    add_sample(runtime)
    with EmbeddedWorker(app, threads=2):
        finished(runtime, cognify(runtime, "sample"), 300)
    assert snapshot(runtime) == lost


def test_a_dead_workers_batch_is_republished_once_and_its_old_delivery_does_nothing(
    runtime: Runtime,
) -> None:
    app = configure(runtime.settings)
    app.control.purge()
    add_sample(runtime)
    job = cognify(runtime, "sample")
    app.control.purge()  # the planned chains: batch 0 is now held by the "dead" worker only
    tracker = JobTracker(runtime.state)
    dead = Claim(step="classify", worker="gone-host:1", gen=0, state="running", at=time.time())
    tracker.claim(job.id, 0, dead)
    period = runtime.settings.worker_heartbeat_seconds
    now = time.time()
    # Missing once is not dead yet (a restarted Redis drops live workers' keys too).
    assert sweep(runtime, app, stall_seconds=3600, now=now) == 0
    assert sweep(runtime, app, stall_seconds=3600, now=now + period) == 1
    assert queued_messages(app) == 1
    recovered = [e for _, e in tracker.events(job.id) if e["event"] == "batch_recovered"]
    assert [(e["batch"], e["step"], e["worker"], e["gen"]) for e in recovered] == [
        (0, "classify", "gone-host:1", 1)
    ]
    # Handed back to the queue: later sweeps leave it alone.
    assert tracker.claims(tracker.get(job.id))[0].state == "republished"
    assert sweep(runtime, app, stall_seconds=3600, now=now + 3 * period) == 0

    # The dead worker's message, redelivered after the visibility timeout, is of generation 0:
    # it runs nothing, stores nothing and ends its chain.
    assert run_step(job.id, "classify") is None
    assert runtime.state.get(step_output_key(job.id, 0, "classify")) is None
    out = run_step(job.id, "classify", gen=1)
    assert out == step_output_key(job.id, 0, "classify")
    # A step redelivered after it ended (its worker died before acknowledging) is not re-run.
    done = tracker.claims(tracker.get(job.id))[0]
    assert (done.step, done.state, done.gen) == ("classify", "done", 1)
    runtime.state.delete(out)
    assert run_step(job.id, "classify", gen=1) is None
    assert runtime.state.get(out) is None


@pytest.mark.slow
def test_a_job_whose_last_recording_lost_its_finalisation_is_finalised(runtime: Runtime) -> None:
    app = configure(runtime.settings)
    app.control.purge()
    add_sample(runtime)
    tracker = JobTracker(runtime.state)
    with EmbeddedWorker(app, threads=2):
        job = finished(runtime, cognify(runtime, "sample"), 300)
    # As if the process died after counting the last batch and before finalising the job.
    job.status, job.finished_at = JobStatus.RUNNING, None
    tracker.save(job)
    assert [j.id for j in tracker.running()] == [job.id]
    assert sweep(runtime, app, stall_seconds=60, now=time.time() + 61) == 0
    assert tracker.get(job.id).status is JobStatus.SUCCEEDED
    assert tracker.running() == []


@pytest.mark.services
def test_queued_messages_are_counted_on_redis(tmp_path: Path) -> None:
    """On Redis with cogmill's key prefix, kombu's passive declare answers NOT_FOUND whatever
    the queue holds: a stalled job's sweep asked it, so a job whose chains were lost was never
    resumed on Redis. Counted with the lists' lengths instead."""
    broker = redis_database_url("sweeper")
    app = configure(Settings(home=tmp_path / "home", broker_url=broker))
    app.control.purge()
    assert queued_messages(app) == 0
    app.send_task(task_name(FINISH), queue=INGEST_QUEUE)
    try:
        assert queued_messages(app) == 1
    finally:
        app.control.purge()
