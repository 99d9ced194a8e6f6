"""A schedule's runs, fired by the beat's own function at chosen times (embedded, worker
threads): each run time fires once whatever number of beats look, a run whose previous run is
still going (or paused by its budget) is skipped and counted, run times the beat was down for
are counted missed, a paused schedule fires nothing, a stale run message starts nothing, a run
sent but never taken is sent again and started once, and /metrics counts the runs by outcome."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.services import schedules as service
from api.services.metrics import scrape
from core.models.jobs import JobStatus
from core.settings import Settings
from pipelines.sources.spec import parse_source
from runtime import Runtime
from tests.backends import finished, threaded_runtime
from tests.sync_support import write
from workers.beat import fire_due, scheduled_run, still_going
from workers.celery_app import app
from workers.jobs import JobTracker
from workers.schedules import LastRun, Schedules
from workers.sync import fail, queue_sync


def last_job(rt: Runtime, schedule_id: str, timeout: float = 60) -> str:
    """The job of the schedule's latest run, once the worker made it."""
    deadline = time.monotonic() + timeout
    while (last := Schedules(rt.state).last(schedule_id)) is None or last.job is None:
        assert time.monotonic() < deadline, last
        time.sleep(0.05)
    return last.job


@pytest.mark.slow
def test_runs_fire_once_skip_while_going_count_missed_and_pause(
    tmp_path: Path, embedder: object
) -> None:
    folder = tmp_path / "source"
    write(folder, {"a.txt": "Ada Lovelace visited London."})
    settings = Settings(home=tmp_path / "home", schedule_min_seconds=1, _env_file=None)  # type: ignore[call-arg]
    with threaded_runtime(settings, {"embedder": embedder}) as rt:
        added = service.add(rt, "docs", source=parse_source(str(folder)), every="10s")
        store = Schedules(rt.state)
        schedule = store.get(added.id)
        due = store.due(schedule)
        assert fire_due(rt, due - 0.5) == pytest.approx(0.5)  # sleeps until it is due
        assert store.last(schedule.id) is None
        fire_due(rt, due)
        fire_due(rt, due)  # a second beat looking at the same time fires nothing more
        first = last_job(rt, schedule.id)
        assert finished(rt, JobTracker(rt.state).get(first)).status is JobStatus.SUCCEEDED
        assert store.counts(schedule.id) == {"fired": 1, "started": 1, "skipped": 0, "missed": 0}
        assert scheduled_run(schedule.id, due - 10) is None  # a stale message starts nothing

        # The next run time comes while a run is still going (its job reads its source).
        going = queue_sync(rt, "docs", str(schedule.source), publish=False)
        store.set_last(schedule.id, LastRun(slot=due + 10, fired_at=due + 10, job=going.id))
        fire_due(rt, due + 20)
        assert store.counts(schedule.id)["skipped"] == 1
        assert store.last(schedule.id).job == going.id  # type: ignore[union-attr]
        fail(rt, going, "stopped by the test")
        # A run paused by its budget is still going too: the next runs wait for its resume.
        paused = going.model_copy(update={"id": "paused-job", "status": JobStatus.PAUSED_BUDGET})
        JobTracker(rt.state).save(paused)
        budgeted = LastRun(slot=due + 10, fired_at=due + 10, job=paused.id)
        assert "paused by its budget" in still_going(rt, budgeted, due + 20)
        assert not still_going(rt, budgeted.model_copy(update={"job": going.id}), due + 20)

        # The beat was down for two run times: one run now, two counted missed.
        fire_due(rt, due + 55)
        assert last_job(rt, schedule.id) != going.id
        assert store.counts(schedule.id)["missed"] == 2
        assert store.due(schedule) == due + 60

        service.set_paused(rt, schedule.id, True)
        fired = store.counts(schedule.id)["fired"]
        fire_due(rt, due + 60)
        assert store.counts(schedule.id)["fired"] == fired
        resumed = service.set_paused(rt, schedule.id, False)
        assert resumed.next_run is not None and resumed.next_run.timestamp() > time.time()

        # A run sent but never taken (its worker killed as it took the message) is sent again;
        # of its deliveries only one starts it.
        store.set_last(schedule.id, LastRun(slot=due + 60, fired_at=time.time() - 60))
        fire_due(rt, time.time())
        again = JobTracker(rt.state).get(last_job(rt, schedule.id))
        assert again.options["slot"] == due + 60
        assert scheduled_run(schedule.id, due + 60) is None

        # /metrics counts the runs by outcome (over every schedule: this home has one).
        text = scrape(rt, app).decode()
        runs = {
            sample.labels["outcome"]: sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "cogmill_schedule_runs"
            for sample in family.samples
            if sample.name == "cogmill_schedule_runs_total"
        }
        assert runs == {k: float(v) for k, v in store.counts(schedule.id).items()}
        assert runs["started"] == 3 and runs["skipped"] == 1 and runs["missed"] == 2
