"""`cogmill beat` fires a sync schedule on time over several periods, with a worker killed and
restarted meanwhile and a second beat started by mistake: no run lost, none doubled, none
stacked (distributed: worker and beat processes on Redis, Neo4j stores).

The time scale is compressed ten times: a 6 s schedule stands for a 1-minute one over 5 minutes
(COGMILL_SCHEDULE_MIN_SECONDS is lowered for it), with the beat's tick, lease window and the
workers' heartbeat shortened alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.services import schedules as service
from api.services.sync import sync
from core.models.jobs import JobStatus
from pipelines.sources.spec import parse_source
from runtime import Runtime
from tests.backends import finished
from tests.distributed import ROOT, WorkerPool, distributed_runtime, running_workers, worker_env
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_url
from tests.sync_support import write
from workers.beat import LEADER
from workers.jobs import JobTracker
from workers.schedules import Schedules

pytestmark = [pytest.mark.e2e, pytest.mark.services, pytest.mark.slow]

PERIOD, PERIODS = 6.0, 5
ON_TIME = 3.0  # seconds from a run time to its job on a loaded 2-core machine


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    with LLMTestServer(latency_ms=200) as llm:
        broker = f"{redis_url().rsplit('/', 1)[0]}/6"
        redis.Redis.from_url(broker).flushdb()  # this test's own database: no stale queues
        fast = {
            "schedule_min_seconds": "1",
            "beat_tick_seconds": "0.2",
            "beat_lock_seconds": "3",
            "sync_lease_seconds": "3",
            "worker_heartbeat_seconds": "2",
            "sweep_interval_seconds": "1",
            "sweep_stall_seconds": "8",
        }
        yield worker_env(tmp_path / "home", broker, neo4j_uri(), llm.base_url, **fast)


def start_beat(env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "api.cli", "beat"],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


def drive(
    rt: Runtime, pool: WorkerPool, env: dict[str, str], log_dir: Path, folder: Path, dataset: str
) -> tuple[str, float]:
    """Beats, a schedule and the faults along its runs: (the schedule's id, its first time)."""
    beats: list[subprocess.Popen] = []
    try:
        beats.append(start_beat(env, log_dir / "beat-1.log"))
        spec = parse_source(str(folder))
        job = finished(rt, sync(rt, dataset, spec), 180)  # the workers are up
        assert job.status is JobStatus.SUCCEEDED, job
        deadline = time.monotonic() + 60
        while rt.state.get(LEADER) is None:  # the beat is up
            assert time.monotonic() < deadline, (log_dir / "beat-1.log").read_text()
            time.sleep(0.1)
        added = service.add(rt, dataset, source=spec, every=f"{PERIOD:g}s")
        first = Schedules(rt.state).due(Schedules(rt.state).get(added.id))

        wait_until(first + 0.3)  # the first run has just started somewhere
        pool.kill(pool.workers[0])
        time.sleep(1.0)
        pool.replace(pool.workers[0])
        wait_until(first + PERIOD + 1)
        beats.append(start_beat(env, log_dir / "beat-2.log"))
        wait_until(first + 2 * PERIOD + 1)
        write(folder, {"c.txt": "Grace Hopper wrote compilers."})  # a run with work
        wait_until(first + (PERIODS - 1) * PERIOD + 2)
        assert all(beat.poll() is None for beat in beats)
        return added.id, first
    finally:
        for beat in beats:
            os.killpg(beat.pid, signal.SIGTERM)
            beat.wait(30)


def test_a_beat_fires_on_time_through_a_killed_worker_and_a_second_beat(
    env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "source"
    write(folder, {"a.txt": "Ada Lovelace visited London.", "b.txt": "Alan Turing ran."})
    dataset = f"beat-{uuid.uuid4().hex[:8]}"
    with distributed_runtime(env) as rt, running_workers(env, tmp_path, count=2) as pool:
        try:
            schedule, first = drive(rt, pool, env, tmp_path, folder, dataset)
            tracker = JobTracker(rt.state)
            runs = [j for j in tracker.all() if j.options.get("schedule") == schedule]
            runs = sorted((finished(rt, j, 120) for j in runs), key=lambda j: j.options["slot"])
            counts = Schedules(rt.state).counts(schedule)
        finally:
            rt.catalog.remove_dataset(dataset)

    times = [first + k * PERIOD for k in range(PERIODS)]
    slots = [j.options["slot"] for j in runs]
    assert len(slots) == len(set(slots)), slots  # none doubled
    assert set(slots) <= set(times), (slots, times)
    # None lost: every run time started a job or was skipped (counted) while one was going.
    assert counts["fired"] == counts["started"] == len(runs), counts
    assert len(runs) + counts["skipped"] == PERIODS and counts["missed"] == 0, counts
    for job in runs:
        late = job.created_at.timestamp() - job.options["slot"]
        # A run whose message went with the killed worker is sent again after the lease.
        assert late < ON_TIME + (3 if job.options["slot"] == first else 0), (job.id, late)
        assert job.status is JobStatus.SUCCEEDED, job
    for before, after in zip(runs, runs[1:], strict=False):  # none stacked
        assert before.finished_at is not None and before.finished_at <= after.created_at
    reports = [j.options["sync"]["report"] for j in runs]
    assert [r["added"] for r in reports].count(1) == 1, reports  # c.txt, once
