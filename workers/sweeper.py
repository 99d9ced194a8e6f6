"""Re-publish the batches nothing is working on any more: a dead worker's, or a lost chain's.

Every worker process runs a sweeper thread; one process per interval (a lease in the state
store) sweeps the running jobs:
- **Dead workers.** A step claims its batch (`JobTracker.claim`) under its process's worker id,
  and the process lists it in a heartbeat (workers/heartbeat.py). A running claim that no live
  worker listed for a whole heartbeat period (its worker died, or a Redis crash lost the
  claim's end; a restart that dropped live workers' keys alone does not count) is re-published
  at once from the batch's last stored step output, in a new generation of the batch. The
  broker redelivers a dead worker's message only after its visibility timeout (an hour by
  default); that delivery then finds its generation outdated and does nothing.
- **Messages a dead worker took.** A step message in kombu's unacknowledged index that no
  live worker holds (a worker killed as it took it), and a batch handed on whose next message
  is in no queue and not unacknowledged (a worker killed between kombu's pop of the message
  and its recording as unacknowledged) are re-published the same way, after a period.
- **Lost chains.** When a task finishes and the broker cannot take the next step's message (or
  a Redis crash loses it), the batch stops with nothing to redeliver. A job that made no
  progress for `sweep_stall_seconds`, has no step running on a live worker, and no message
  waiting in the queues, has its unfinished batches re-published the same way (or is finalised,
  when every batch is recorded and only the finalisation was lost).
Batches parked by the job's budget (workers/budgets.py) wait for `jobs resume`: no sweep counts
them as lost or stalled.
Steps are idempotent upserts, so a re-published batch that races a late message repeats work
at most, and the generation check stops the older chain at its next step.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from typing import Any

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown

from core.models.jobs import Claim, Job, JobStatus
from core.ports import StoreError
from pipelines.definitions import get_pipeline
from pipelines.models import DocumentBatch
from runtime import Runtime, current_runtime, use_runtime
from workers.celery_app import FINISH, INGEST_QUEUE, LLM_QUEUE, TASK_STEPS, queue_depths
from workers.chains import batch_chain
from workers.delivery import Delivery
from workers.heartbeat import running_steps, worker_id
from workers.jobs import JobTracker, batch_input_key, step_output_key
from workers.sync import resume_stale

log = logging.getLogger("cogmill.sweeper")
# Each running job's unfinished batches' claims, read once per sweep.
Claims = dict[str, tuple[Job, dict[int, Claim]]]


def queued_messages(app: Celery) -> int:
    """Messages waiting in the cogmill queues (not counting those a worker holds)."""
    return sum(queue_depths(app).values())


def unacked_steps(app: Celery) -> list[Delivery]:
    """The step and finish messages that a worker took from the broker and has not
    acknowledged (kombu's Redis transport keeps them until the ack)."""
    return _broker_steps(app, queued=False)


def queued_steps(app: Celery) -> list[Delivery]:
    """The step and finish messages waiting in the queues."""
    return _broker_steps(app, queued=True)


def inspectable(app: Celery) -> bool:
    """Whether the broker's queued and unacknowledged messages can be read (Redis: yes; the
    in-process broker of embedded mode, where nothing outlives its process: no)."""
    with app.connection_for_write() as conn:
        return hasattr(conn.default_channel, "unacked_index_key")


def _broker_steps(app: Celery, queued: bool) -> list[Delivery]:
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        if not hasattr(channel, "unacked_index_key"):
            return []  # see `inspectable`
        client = channel.client  # adds the deployment's key prefix to the commands kombu uses
        if queued:
            prefix = getattr(client, "global_keyprefix", "")
            raws = [
                raw
                for queue in (INGEST_QUEUE, LLM_QUEUE)
                for pri in channel.priority_steps
                for raw in client.lrange(prefix + channel._q_for_pri(queue, pri), 0, -1)
            ]
        else:
            tags = client.zrange(channel.unacked_index_key, 0, -1)
            raws = [
                json.dumps(json.loads(raw)[0])
                for tag in tags
                if (raw := client.hget(channel.unacked_key, tag)) is not None
            ]
    return [work for raw in raws if (work := _delivery(json.loads(raw))) is not None]


def _delivery(message: dict[str, Any]) -> Delivery | None:
    """The delivery a cogmill step or finish message stands for (None for any other)."""
    task = message.get("headers", {}).get("task")
    if task not in TASK_STEPS:
        return None
    body = message["body"]
    if message.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    return Delivery.of_message(task, json.loads(body)[1])


def resume_point(jobs: JobTracker, job_id: str, batch: int) -> tuple[DocumentBatch, list[str], str]:
    """A batch's planned input, the steps it still has to run, and the key of their first
    input."""
    source = DocumentBatch.model_validate_json(jobs.artifact(batch_input_key(job_id, batch)))
    steps = get_pipeline(source.pipeline).step_names
    for done in range(len(steps), 0, -1):
        key = step_output_key(job_id, batch, steps[done - 1])
        if jobs.state.get(key) is not None:
            return source, steps[done:], key
    return source, steps, batch_input_key(job_id, batch)


def republish(jobs: JobTracker, job_id: str, batch: int, event: str, **fields: object) -> None:
    """Publish the rest of a batch in a new generation, from its last stored step output."""
    source, steps, in_key = resume_point(jobs, job_id, batch)
    gen = jobs.next_generation(job_id, batch)
    # No worker holds the batch until one takes the new message: later sweeps leave it alone.
    first = steps[0] if steps else FINISH
    claim = Claim(step=first, worker=worker_id(), gen=gen, state="republished", at=time.time())
    jobs.claim(job_id, batch, claim)
    batch_chain(job_id, batch, source, steps, in_key=in_key, gen=gen).apply_async()
    jobs.event(job_id, event, batch=batch, steps=steps, gen=gen, **fields)


class Sweep:
    """One sweep over the running jobs at time `now` (see the module docstring)."""

    def __init__(self, runtime: Runtime, app: Celery, now: float) -> None:
        self.settings, self.app, self.now = runtime.settings, app, now
        self.runtime = runtime
        self.jobs = JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)
        self.state = runtime.state

    def run(self, stall_seconds: float) -> int:
        """Re-publish what needs it; returns how many batches were re-published."""
        abandoned: Claims = {}
        stalled: list[Job] = []
        claims: Claims = {}
        for job in self.jobs.running():
            if job.status is JobStatus.QUEUED:  # a sync reading its source: its lease tells
                resume_stale(self.runtime, job)
                continue
            unfinished = set(self.jobs.unfinished_batches(job))
            claimed = {b: c for b, c in self.jobs.claims(job).items() if b in unfinished}
            claims[job.id] = (job, claimed)
            if self.jobs.cancelled(job.id):
                continue  # finish_batch of the live tasks (or a later cancel) ends it
            held, unheld = self._held_claims(job, claimed)
            lost = {b: c for b, c in unheld.items() if self._missing_for_a_period(job, b, c)}
            if lost:
                abandoned[job.id] = (job, lost)
            if not held and self.now - self.jobs.last_progress(job) > stall_seconds:
                stalled.append(job)
        for found in (self._orphans(abandoned), self._lost_messages(claims, abandoned)):
            for job, batches in found.values():
                abandoned.setdefault(job.id, (job, {}))[1].update(batches)
        # Queued work may be the stalled jobs' own: counted before this sweep publishes any.
        resume = stalled and not queued_messages(self.app)
        republished = sum(self._recover(job, lost) for job, lost in abandoned.values())
        if resume:
            for job in stalled:
                just_recovered = abandoned.get(job.id, (job, {}))[1].keys()
                republished += self._resume_stalled(job, skip=set(just_recovered))
        return republished

    def _held_claims(
        self, job: Job, unfinished: dict[int, Claim]
    ) -> tuple[dict[int, Claim], dict[int, Claim]]:
        """Of the unfinished batches' claims, those that say a worker holds the batch (running,
        or done and not yet handed on): those a live worker lists in its heartbeat, and the
        others."""
        claims = {b: c for b, c in unfinished.items() if c.held}
        listed = running_steps(self.state, {c.worker for c in claims.values()})
        held = {b: c for b, c in claims.items() if c.token(job.id, b) in listed.get(c.worker, ())}
        return held, {b: c for b, c in claims.items() if b not in held}

    def _orphans(self, claimed: Claims) -> Claims:
        """Batches whose step message a worker took but no live worker holds for a heartbeat
        period: its worker died before it could claim the step (a prefork parent killed with
        messages it had reserved, or killed as it took one). Not those `claimed` already."""
        found: Claims = {}
        for work in unacked_steps(self.app):
            job_id, batch = work.job_id, work.batch
            if batch in claimed.get(job_id, (None, {}))[1]:
                continue
            try:
                job = self.jobs.get(job_id, live=False)
            except LookupError:
                continue
            if job.status.finished or work.stale(self.jobs):
                continue  # nothing to do: its delivery will end without running
            claim = work.claim("unclaimed", "running", at=self.now)
            if self._held(job, batch, claim) or not self._missing_for_a_period(job, batch, claim):
                continue
            found.setdefault(job_id, (job, {}))[1][batch] = claim
        return found

    def _lost_messages(self, claims: Claims, claimed: Claims) -> Claims:
        """Batches handed on (or re-published) whose message is in no queue and held by no
        worker for a heartbeat period: a worker killed between taking a message from its queue
        and recording it as unacknowledged (kombu does the two one after the other) lost it.
        `claims` are the running jobs' unfinished batches' claims; not those `claimed` already."""
        period = self.settings.worker_heartbeat_seconds
        waiting: Claims = {}
        for job, unfinished in claims.values():
            handed = {
                b: c
                for b, c in unfinished.items()
                if not c.held
                and self.now - c.at >= period  # a message just published is in a queue
                and b not in claimed.get(job.id, (job, {}))[1]
            }
            if handed:
                waiting[job.id] = (job, handed)
        if not waiting or not inspectable(self.app):
            return {}
        in_broker = {
            (w.job_id, w.batch, w.gen) for w in queued_steps(self.app) + unacked_steps(self.app)
        }
        lost: Claims = {}
        for job_id, (job, handed) in waiting.items():
            for batch, claim in handed.items():
                if (job_id, batch, claim.gen) in in_broker:
                    continue
                if self._missing_for_a_period(job, batch, claim, what="message"):
                    lost.setdefault(job_id, (job, {}))[1][batch] = claim
        return lost

    def _held(self, job: Job, batch: int, step: Claim) -> bool:
        """Whether the batch's claim is for `step` and its live worker lists it."""
        claim = self.jobs.position(job.id, batch)[2]
        if claim is None or claim.token(job.id, batch) != step.token(job.id, batch):
            return False
        listed = running_steps(self.state, [claim.worker]).get(claim.worker, ())
        return claim.token(job.id, batch) in listed

    def _missing_for_a_period(
        self, job: Job, batch: int, claim: Claim, what: str = "holder"
    ) -> bool:
        """Whether the claim was already unlisted at a sweep at least a heartbeat period ago
        (its worker died, or a Redis crash lost the claim's end): a restarted Redis may have
        dropped live workers' keys, which they renew within a third of a period."""
        period = self.settings.worker_heartbeat_seconds
        key = f"sweeper:missing:{what}:{claim.token(job.id, batch)}"
        first = self.state.get(key)
        if first is None:  # expires soon after, so a later miss starts anew
            self.state.put(key, str(self.now), ttl=3 * period)
            return False
        return self.now - float(first) >= period

    def _recover(self, job: Job, abandoned: dict[int, Claim]) -> int:
        for batch, claim in sorted(abandoned.items()):
            republish(
                self.jobs,
                job.id,
                batch,
                "batch_recovered",
                step=claim.step,
                worker=claim.worker,
                claimed_at=claim.at,
            )
            log.warning(
                "recovered batch=%s job=%s step=%s from dead worker %s",
                batch,
                job.id,
                claim.step,
                claim.worker,
            )
        return len(abandoned)

    def _resume_stalled(self, job: Job, skip: set[int]) -> int:
        """Re-publish a stalled job's unfinished batches but `skip`, or finalise it if none is
        left."""
        unfinished = self.jobs.unfinished_batches(job)  # not the parked ones: they wait
        if not unfinished and self.jobs.settled(job.id):
            self.jobs.finalise(job.id)  # the last batch was recorded (or parked), its end lost
            return 0
        unfinished = [b for b in unfinished if b not in skip]
        for batch in unfinished:
            republish(self.jobs, job.id, batch, "batch_resumed")
        self.jobs.touch(job.id)
        return len(unfinished)


def sweep(runtime: Runtime, app: Celery, stall_seconds: float, now: float | None = None) -> int:
    """One sweep (see the module docstring); returns how many batches were re-published."""
    return Sweep(runtime, app, time.time() if now is None else now).run(stall_seconds)


class Sweeper:
    """A daemon thread that sweeps every `interval` seconds, one process per interval."""

    def __init__(self, app: Celery, interval: float, stall_seconds: float) -> None:
        self.app, self.interval, self.stall_seconds = app, interval, stall_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cogmill-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                runtime = current_runtime()
                period = int(time.time() // self.interval)
                if runtime.state.incr(f"sweeper:lease:{period}") == 1:
                    runtime.state.delete(f"sweeper:lease:{period - 2}")  # keeps two at most
                    sweep(runtime, self.app, self.stall_seconds)
            except (StoreError, OSError) as err:
                log.warning("sweep skipped: %s", err)
            except Exception:  # noqa: BLE001 - the sweeper must outlive one bad sweep
                log.exception("sweep failed")


_sweeper: Sweeper | None = None


@worker_ready.connect
def _start_sweeper(sender: object = None, **_: object) -> None:
    global _sweeper
    app = getattr(sender, "app", None)
    if app is None or str(app.conf.broker_url).startswith("memory://"):
        return  # embedded mode: the broker lives in this process and loses nothing alone
    settings = current_runtime().settings
    _sweeper = Sweeper(app, settings.sweep_interval_seconds, settings.sweep_stall_seconds)
    _sweeper.start()


@worker_process_init.connect
def _own_runtime(**_: object) -> None:
    """A prefork child opens its own stores: driver connections do not survive a fork."""
    use_runtime(None)


@worker_shutdown.connect
def _stop_sweeper(**_: object) -> None:
    if _sweeper is not None:
        _sweeper.stop()
