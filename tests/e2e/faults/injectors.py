"""Faults injected while a job runs, each at a random moment while a step is running.

A step is known to run from the batch claims (`JobTracker.claims`: which worker process runs a
batch's step, as `host:pid`). A victim is chosen among the claims in state "running" whose pid
belongs to one of the run's workers; after the kill the claim is read again: only if it still
names the dead process running that batch did the kill hit a running step (else it counts as
a miss and another victim is sought). Recovery is the time from the kill until the batch is
claimed by another process or recorded done.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core.models.jobs import Claim, Job, JobStatus
from core.ports import StoreError
from tests.distributed import Worker, WorkerPool
from workers.jobs import JobTracker

RECOVERY_TARGET_S = 60.0


@dataclass
class Kill:
    """One fault: what was running where, when, and how long until it was taken up again."""

    what: str  # e.g. "worker threads ingest,llm" or "redis"
    batch: int
    step: str
    victim: str  # the claim's worker (host:pid); "" for a server
    at: float  # time.monotonic() of the kill
    claim: tuple = ()  # (worker, step, state, gen) of the batch's claim at the kill
    recovered_after: float | None = None
    back_after: float = 0.0  # a killed server: seconds until it answered again

    @property
    def recovery(self) -> float | None:
        """The system's own recovery: from the kill (a worker) or from the server's return."""
        return None if self.recovered_after is None else self.recovered_after - self.back_after

    def describe(self) -> str:
        took = "not recovered" if self.recovered_after is None else f"{self.recovered_after:.1f}s"
        if self.back_after and self.recovery is not None:
            took += f" ({self.back_after:.1f}s until it answered, {self.recovery:.1f}s after)"
        where = f" on {self.victim}" if self.victim else ""
        return f"{self.what}: batch {self.batch} step {self.step}{where} -> {took}"


def running_claims(tracker: JobTracker, job: Job) -> dict[int, Claim]:
    return {b: c for b, c in tracker.claims(job).items() if c.state == "running"}


def _position(claim: Claim) -> tuple:
    return (claim.worker, claim.step, claim.state, claim.gen)


def claim_pid(claim: Claim) -> int:
    return int(claim.worker.rsplit(":", 1)[1])


@dataclass
class Recovery:
    """Watches killed steps until their batch moves on; one call per poll of the job."""

    tracker: JobTracker
    kills: list[Kill] = field(default_factory=list)

    def poll(self, job: Job | None) -> None:
        if job is None:
            return
        pending = [k for k in self.kills if k.recovered_after is None]
        if not pending:
            return
        try:
            claims = self.tracker.claims(job)
            recorded = {k.batch: self.tracker.batch_recorded(job.id, k.batch) for k in pending}
        except StoreError:
            return  # the state store is the server being killed
        now = time.monotonic()
        for kill in pending:
            claim = claims.get(kill.batch)
            moved = claim is not None and _position(claim) != kill.claim
            if recorded[kill.batch] or moved:
                kill.recovered_after = now - kill.at

    def settle(self, job: Job) -> None:
        """The finished job. One that succeeded recorded every batch, so a kill still pending
        was taken up by its end: the last look at the running job can come before the one step
        that both records the last batch and finishes the job (timed from the kill to now, so a
        slow recovery still shows)."""
        if job.status is not JobStatus.SUCCEEDED:
            return
        now = time.monotonic()
        for kill in self.kills:
            if kill.recovered_after is None:
                kill.recovered_after = now - kill.at

    def unrecovered(self, limit: float) -> list[Kill]:
        """Kills not recovered `limit` seconds after they happened."""
        now = time.monotonic()
        return [k for k in self.kills if k.recovered_after is None and now - k.at > limit]


class WorkerKiller:
    """SIGKILLs busy workers at random moments, `count` times, replacing each at once.

    The i-th kill takes a worker that `targets[i % len(targets)]` accepts (a pool, a queue), and
    waits for one to run a step for as long as the job runs: the job's end is the only bound,
    so a kind whose steps come late is not given up for whatever runs first. `child_only`
    kills the prefork pool child that runs the step instead of the whole worker.
    """

    def __init__(
        self,
        workers: WorkerPool,
        tracker: JobTracker,
        count: int,
        rng: random.Random,
        gap: tuple[float, float],
        targets: Sequence[Callable[[Worker], bool]],
        child_only: bool,
    ) -> None:
        self.workers, self.tracker, self.count, self.rng = workers, tracker, count, rng
        self.gap, self.targets, self.child_only = gap, targets, child_only
        self.recovery = Recovery(tracker)
        self.misses = 0
        self.next_at = time.monotonic() + rng.uniform(0.0, gap[0])  # the first: early

    @property
    def kills(self) -> list[Kill]:
        return self.recovery.kills

    def __call__(self, job: Job | None) -> None:
        self.recovery.poll(job)
        if job is None or len(self.kills) >= self.count or time.monotonic() < self.next_at:
            return
        wanted = self.targets[len(self.kills) % len(self.targets)]
        candidates = []
        for batch, claim in running_claims(self.tracker, job).items():
            worker = self.workers.owner(claim_pid(claim))
            if worker is not None and wanted(worker):
                candidates.append((batch, claim, worker))
        if not candidates:
            return
        batch, claim, worker = self.rng.choice(candidates)
        pid = claim_pid(claim) if self.child_only else None
        self.workers.kill(worker, pid)
        at = time.monotonic()
        after = self.tracker.claims(job).get(batch)
        if pid is None or not worker.alive():
            self.workers.replace(worker)
        if after is None or after.worker != claim.worker or after.state != "running":
            self.misses += 1  # the step ended between the look and the kill
            return
        what = _kind(worker) + (" (pool child)" if pid else "")
        self.kills.append(Kill(what, batch, after.step, claim.worker, at, _position(after)))
        self.next_at = at + self.rng.uniform(*self.gap)


def _kind(worker: Worker) -> str:
    return f"worker {worker.pool} {worker.queues}"


class ServerKiller:
    """SIGKILLs a server (`kill`) while a step runs, `count` times, then restarts it."""

    def __init__(
        self,
        name: str,
        kill: Callable[[], None],
        restart: Callable[[], None],
        tracker: JobTracker,
        workers: WorkerPool,
        count: int,
        rng: random.Random,
        gap: tuple[float, float] = (2.0, 8.0),
    ) -> None:
        self.name, self.kill, self.restart = name, kill, restart
        self.tracker, self.workers, self.count, self.rng = tracker, workers, count, rng
        self.gap = gap
        self.recovery = Recovery(tracker)
        self.next_at = time.monotonic() + rng.uniform(*gap)
        self.replaced = 0  # workers that exited during the outage and were started again

    @property
    def kills(self) -> list[Kill]:
        return self.recovery.kills

    def __call__(self, job: Job | None) -> None:
        self.replaced += self.workers.replace_exited()  # as a supervisor restarts a consumer
        self.recovery.poll(job)
        if job is None or len(self.kills) >= self.count or time.monotonic() < self.next_at:
            return
        try:
            running = running_claims(self.tracker, job)
        except StoreError:
            return
        if not running:
            return
        batch = self.rng.choice(sorted(running))
        self.kill()
        at = time.monotonic()
        self.restart()
        claim = running[batch]
        # The worker's step outlives the server (it retries); recovery: the batch moves on.
        kill = Kill(self.name, batch, claim.step, "", at, _position(claim))
        kill.back_after = time.monotonic() - at
        self.kills.append(kill)
        self.next_at = time.monotonic() + self.rng.uniform(*self.gap)
