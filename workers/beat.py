"""Celery beat over the schedules in the state store, and the task each run is.

`cogmill beat` runs Celery beat with `StateScheduler`: at each tick it reads the schedules
(workers/schedules.py), fires those due as the task `cogmill.scheduled_run` (ingest queue,
served first) and sleeps until the next due time (at most COGMILL_BEAT_TICK_SECONDS). In
embedded mode `cogmill serve` runs the same scheduler on a thread of its own: the in-process
broker and the embedded stores belong to that one process, which is the only one alive
between commands.

A second beat started by mistake fires nothing twice, for two reasons. Beats take the lead
by windows of COGMILL_BEAT_LOCK_SECONDS, each window's lease claimed with an atomic counter
in the state store: the leader claims the next window in the last third of its own, so a
standby takes over only when the leader stopped claiming (it died). And each run time of a
schedule is claimed the same way before it is fired, so even two beats that both believe they
lead (a paused process waking up) fire it once.

A run is skipped, and counted, while its schedule's previous run is still going (its job
unfinished or paused by its budget, or its message not yet taken by a worker). Run times the
beat was down for are counted missed, and the schedule runs once when it is back. A run no
worker started within COGMILL_SYNC_LEASE_SECONDS is sent again (its message went with a
killed worker); a claim per run time lets one delivery start it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import Any

from celery import beat

from core.models.jobs import JobStatus
from core.ports import StoreError
from runtime import Runtime, current_runtime
from workers.celery_app import INGEST_QUEUE, app, task_name
from workers.jobs import JobNotFoundError, JobTracker
from workers.orchestration import PlanError, cognify
from workers.schedules import LastRun, Schedule, ScheduleNotFoundError, Schedules
from workers.sync import DatasetBusyError, queue_sync, run_sync, unfinished_on

log = logging.getLogger("cogmill.beat")
RUN_TASK = task_name("scheduled_run")
LEASE = "beat:lease:"
LEADER = "beat:leader"  # who led last, for `schedules list` (expires with the lead)


class Leadership:
    """Whether this beat leads now: it holds the lease of the current window."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.owned: set[int] = set()

    def _claim(self, runtime: Runtime, window: int) -> bool:
        key = f"{LEASE}{window}"
        if runtime.state.incr(key) != 1:
            return False
        runtime.state.put(key, "1", ttl=3 * self.seconds)  # still no 1 for a later claimer
        self.owned.add(window)
        return True

    def leads(self, runtime: Runtime, now: float) -> bool:
        window = int(now // self.seconds)
        self.owned = {w for w in self.owned if w >= window}
        if window not in self.owned and not self._claim(runtime, window):
            return False
        if now >= (window + 1 - 1 / 3) * self.seconds and window + 1 not in self.owned:
            self._claim(runtime, window + 1)
        runtime.state.put(LEADER, self.me, ttl=2 * self.seconds)
        return True


class StateScheduler(beat.Scheduler):
    """Celery beat's scheduler for the schedules kept in the state store."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leadership: Leadership | None = None

    def setup_schedule(self) -> None:
        """No static entries: every tick reads the schedules from the state store."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        runtime = current_runtime()
        settings = runtime.settings
        if self.leadership is None:
            self.leadership = Leadership(settings.beat_lock_seconds)
        try:
            now = time.time()
            if not self.leadership.leads(runtime, now):
                return settings.beat_tick_seconds
            return max(0.05, fire_due(runtime, now))
        except (StoreError, OSError) as err:
            log.warning("beat tick skipped: %s", err)
            return settings.beat_tick_seconds


def fire_due(runtime: Runtime, now: float) -> float:
    """Fire every schedule due at `now`; seconds until the next one is (at most a tick)."""
    schedules = Schedules(runtime.state)
    wait = runtime.settings.beat_tick_seconds
    for schedule in schedules.all():
        if schedule.paused:
            continue
        resend_untaken(runtime, schedules, schedule, now)
        due = schedules.due(schedule)
        if now >= due:
            claimed = schedules.claim(schedule, due)
            if claimed:
                fire(runtime, schedules, schedule, due, now)
            following = schedule.following(due)
            if following <= now:  # the beat was down: run once, count the others missed
                following = schedule.following(now)
                if claimed:
                    schedules.count(schedule.id, "missed")
            schedules.set_due(schedule, following)
            due = following
        wait = min(wait, due - now)
    return wait


def resend_untaken(runtime: Runtime, schedules: Schedules, schedule: Schedule, now: float) -> None:
    """Send a run again that no worker started within COGMILL_SYNC_LEASE_SECONDS (its message
    went with a worker killed as it took it, whose broker would hand it on only after its
    visibility timeout); whichever delivery comes first starts it, the others do nothing."""
    last = schedules.last(schedule.id)
    grace = runtime.settings.sync_lease_seconds
    if last is None or last.outcome != "fired" or last.job is not None:
        return
    if now - last.fired_at >= grace:
        schedules.set_last(schedule.id, last.model_copy(update={"fired_at": now}))
        log.warning("schedule %s: run at %.0f not started; sent again", schedule.id, last.slot)
        send(schedule, last.slot)


def send(schedule: Schedule, slot: float) -> None:
    kwargs = {"schedule": schedule.id, "slot": slot, "dataset": schedule.dataset}
    app.send_task(RUN_TASK, kwargs=kwargs, queue=INGEST_QUEUE, priority=0)


def still_going(runtime: Runtime, last: LastRun | None, now: float) -> str:
    """Why the schedule's previous run is still going ("" when it is not)."""
    if last is None or last.outcome != "fired":
        return ""
    if last.job is None:
        return "its run waits for a worker"
    try:
        job = JobTracker(runtime.state).get(last.job, live=False)
    except JobNotFoundError:
        return ""
    if job.status is JobStatus.PAUSED_BUDGET:
        return f"its job {job.id} is paused by its budget (`cogmill jobs resume` or cancel it)"
    return "" if job.status.finished else f"its job {job.id} is still {job.status.value}"


def fire(
    runtime: Runtime, schedules: Schedules, schedule: Schedule, slot: float, now: float
) -> None:
    """Send a schedule's run for its time `slot`, unless its previous run is still going."""
    reason = still_going(runtime, schedules.last(schedule.id), now)
    if reason:
        schedules.count(schedule.id, "skipped")
        log.info("schedule %s skipped its run at %.0f: %s", schedule.id, slot, reason)
        return
    schedules.set_last(schedule.id, LastRun(slot=slot, fired_at=now))
    schedules.count(schedule.id, "fired")
    send(schedule, slot)


@app.task(name=RUN_TASK)
def scheduled_run(schedule: str, slot: float, dataset: str = "") -> str | None:
    """Run schedule `schedule` for its time `slot` on `dataset`: a sync of its source or a
    cognify; returns the job's id (None: skipped, or a stale delivery)."""
    runtime = current_runtime()
    schedules = Schedules(runtime.state)
    try:
        found = schedules.get(schedule, any_tenant=True)
    except ScheduleNotFoundError:
        return None  # removed since it fired
    last = schedules.last(found.id)
    if last is None or last.slot != slot or last.job is not None or last.outcome != "fired":
        return None  # a later run superseded it, or a redelivery of a started run
    if not schedules.start(found, slot):
        return None  # another delivery of this run (sent again) started it
    try:
        return start_run(runtime, schedules, found, last)
    except (DatasetBusyError, PlanError) as err:
        note = str(err)
    schedules.set_last(found.id, last.model_copy(update={"outcome": "skipped", "note": note}))
    schedules.count(found.id, "skipped")
    log.info("schedule %s skipped its run at %.0f: %s", found.id, slot, note)
    return None


def start_run(runtime: Runtime, schedules: Schedules, schedule: Schedule, last: LastRun) -> str:
    """Make the run's job (its id is recorded at once), then run a sync's source phase here."""
    options: dict[str, Any] = {"schedule": schedule.id, "slot": last.slot}
    if schedule.action == "sync":
        sync = {"schedule": schedule.id}
        job = queue_sync(
            runtime,
            schedule.dataset,
            str(schedule.source),
            budget=schedule.budget,
            options={**options, "sync": sync},
            publish=False,
        )
        schedules.set_last(schedule.id, last.model_copy(update={"job": job.id}))
        schedules.count(schedule.id, "started")
        run_sync(runtime, job.id, 0)
        return job.id
    busy = unfinished_on(runtime, schedule.dataset)
    if busy:
        raise DatasetBusyError(schedule.dataset, busy)
    mode = "all" if schedule.everything else "changed"
    job = cognify(runtime, schedule.dataset, None, mode, options, schedule.budget)
    schedules.set_last(schedule.id, last.model_copy(update={"job": job.id}))
    schedules.count(schedule.id, "started")
    return job.id


def embedded_beat() -> Any:
    """The scheduler on a thread of this process (embedded `cogmill serve`); `.start()` it,
    `.stop()` it."""
    return beat.EmbeddedService(app, thread=True, scheduler_cls=StateScheduler)
