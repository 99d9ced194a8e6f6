"""Sync jobs: read a source, make the dataset mirror it, then cognify exactly what changed.

A sync is one job from start to end. It is saved QUEUED and its source phase is the Celery
task `cogmill.sync` (on the ingest queue, served first): read the source against its cursor
(pipelines/sources), add / replace / remove documents (pipelines/sources/mirror.py), stage
the new cursor, then plan the cognify into the same job (`run_job`), which runs and ends like
any job (jobs list, events, webhooks, budgets, /metrics). The cursor is kept when the job
succeeds (workers/sync_cursor.py).

One job at a time per dataset: a sync is refused (or, scheduled, skipped) while another job on
the dataset is unfinished; two started at once both see each other after saving, and withdraw.

The source phase holds a lease in the state store, renewed every third of
COGMILL_SYNC_LEASE_SECONDS. A QUEUED sync whose lease ran out lost its worker: the sweeper
publishes its source phase again in a new generation (the older delivery then does nothing),
and in embedded mode, where a dead process takes its queue along, the next sync on the
dataset ends it as failed. Either way the dataset ends as one clean sync would leave it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from core.catalog import CatalogError
from core.errors import Conflict
from core.models.documents import STATUS, DocumentStatus
from core.models.jobs import Budget, Job, JobStatus, utcnow
from core.models.vocabulary import DOCUMENT
from core.ports import StateStore, StoreError
from pipelines.sources import SourceError, SourceSpec, read_source
from pipelines.sources.access import check_access
from pipelines.sources.listing import Scratch
from pipelines.sources.mirror import Mirror, SyncReport, scratch_folder
from pipelines.structured.key_declarations import KeyDeclarationError
from pipelines.structured.tables import check_source
from runtime import Runtime
from workers import sync_cursor
from workers.celery_app import INGEST_QUEUE, app
from workers.heartbeat import running_steps
from workers.jobs import JOBS, RUNNING, JobTracker
from workers.orchestration import run_job

log = logging.getLogger("cogmill.sync")

TASK = "cogmill.sync"  # registered in workers/sync_tasks.py
SOURCE_PREFIX = "sync:source:"
LEASE_PREFIX = "sync:lease:"
GEN_PREFIX = "sync:gen:"


class DatasetBusyError(Conflict):
    """Another job on the dataset is unfinished: a sync would race its writes."""

    code = "dataset_busy"

    def __init__(self, dataset: str, job_ids: list[str]) -> None:
        super().__init__(f"dataset {dataset!r} has unfinished jobs: {', '.join(job_ids)}")
        self.dataset, self.job_ids = dataset, job_ids


class SourceRecord(BaseModel):
    """A source as a dataset follows it: the spec (credentials included, never shown), the
    stored dataset name, its tenant, and whether an API caller asked for it (then every run
    checks it against COGMILL_SYNC_ROOTS and the network rules again)."""

    spec: SourceSpec
    dataset: str
    tenant: str | None = None
    remote: bool = False


def save_source(state: StateStore, source_id: str, record: SourceRecord) -> None:
    state.put(SOURCE_PREFIX + source_id, record.model_dump_json())


def load_source(state: StateStore, source_id: str) -> SourceRecord:
    raw = state.get(SOURCE_PREFIX + source_id)
    if raw is None:
        raise SourceError(f"source {source_id} is no longer known; start the sync again")
    return SourceRecord.model_validate_json(raw)


def tracker(runtime: Runtime) -> JobTracker:
    return JobTracker(runtime.state, runtime.settings.artifact_ttl_seconds)


def unfinished_on(runtime: Runtime, dataset: str, but: str = "") -> list[str]:
    """Ids of the unfinished jobs on a dataset (but one). In embedded mode a job whose process
    died (its queue went with it) is ended as failed here instead: its documents are left
    unprocessed, so the sync about to run cognifies them."""
    found = []
    for job in tracker(runtime).running():
        if job.dataset != dataset or job.id == but:
            continue
        if runtime.settings.embedded_broker and (stale(runtime, job) or orphaned(runtime, job)):
            fail(runtime, job, "interrupted: the process running it stopped")
            continue
        found.append(job.id)
    return found


def orphaned(runtime: Runtime, job: Job) -> bool:
    """Whether a running job made no progress for COGMILL_SWEEP_STALL_SECONDS and no live
    worker holds a step of it (embedded: the process that ran it is gone)."""
    jobs = tracker(runtime)
    idle = time.time() - jobs.last_progress(job)
    if job.status is not JobStatus.RUNNING or idle < runtime.settings.sweep_stall_seconds:
        return False
    claims = {b: c for b, c in jobs.claims(job).items() if c.held}
    listed = running_steps(runtime.state, {c.worker for c in claims.values()})
    return not any(c.token(job.id, b) in listed.get(c.worker, ()) for b, c in claims.items())


def stale(runtime: Runtime, job: Job) -> bool:
    """Whether a sync job is in its source phase with no one holding its lease."""
    queued = job.status is JobStatus.QUEUED and sync_cursor.source_of(job) is not None
    return queued and runtime.state.get(LEASE_PREFIX + job.id) is None


def queue_sync(
    runtime: Runtime,
    dataset: str,
    source_id: str,
    *,
    budget: Budget | None = None,
    options: dict[str, Any] | None = None,
    publish: bool = True,
) -> Job:
    """Save a sync job on the dataset and publish its source phase (`publish=False`: the
    caller runs it, `run_sync(job.id, 0)`); DatasetBusyError while another job on the dataset
    is unfinished (then nothing is left behind)."""
    record = load_source(runtime.state, source_id)
    busy = unfinished_on(runtime, dataset)
    if busy:
        raise DatasetBusyError(dataset, busy)
    extra = dict(options or {})
    sync = {"source": source_id, "name": record.spec.display(), **extra.pop(sync_cursor.SYNC, {})}
    job = Job(
        id=uuid.uuid4().hex,
        dataset=dataset,
        pipeline="sync",
        pipeline_version="",
        options={**extra, sync_cursor.SYNC: sync},
        budget=budget,
        status=JobStatus.QUEUED,
        message=f"reading {record.spec.display()}",
    )
    jobs = tracker(runtime)
    jobs.save(job)
    busy = unfinished_on(runtime, dataset, but=job.id)
    if busy:  # started at the same time as another: both withdraw, neither runs twice
        _withdraw(runtime.state, job.id)
        raise DatasetBusyError(dataset, busy)
    jobs.event(job.id, "queued", source=record.spec.display())
    if publish:
        publish_phase(runtime, job, generation=0)
    else:  # run by the caller: leased as if queued
        hold(runtime, job, generation=0)
    return job


def _withdraw(state: StateStore, job_id: str) -> None:
    state.remove_member(RUNNING, job_id)
    state.remove_member(JOBS, job_id)
    state.delete(f"job:{job_id}")


def hold(runtime: Runtime, job: Job, generation: int) -> None:
    """Lease a sync's source phase until a worker takes it (and leases it itself)."""
    wait = max(runtime.settings.sync_lease_seconds, runtime.settings.sweep_stall_seconds)
    runtime.state.put(LEASE_PREFIX + job.id, f"queued:{generation}", ttl=wait)


def publish_phase(runtime: Runtime, job: Job, generation: int) -> None:
    """Publish a sync's source phase; its lease covers the wait for a worker."""
    hold(runtime, job, generation)
    kwargs = {"job_id": job.id, "dataset": job.dataset, "gen": generation}
    app.send_task(TASK, kwargs=kwargs, queue=INGEST_QUEUE, priority=0)


def resume_stale(runtime: Runtime, job: Job) -> bool:
    """Publish a stale sync's source phase again in a new generation (the sweeper's part);
    True when it did."""
    if not stale(runtime, job):
        return False
    generation = runtime.state.incr(GEN_PREFIX + job.id)
    tracker(runtime).event(job.id, "sync_resumed", gen=generation)
    log.warning("sync job %s lost its worker; its source phase runs again", job.id)
    publish_phase(runtime, job, generation)
    return True


class Lease:
    """A sync's hold on its source phase, renewed by a thread while the phase runs."""

    def __init__(self, state: StateStore, job_id: str, generation: int, seconds: float) -> None:
        self.state, self.key = state, LEASE_PREFIX + job_id
        self.value, self.seconds = f"running:{generation}", seconds
        self.gen_key, self.generation = GEN_PREFIX + job_id, generation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="cogmill-sync-lease", daemon=True)

    def current(self) -> bool:
        """Whether no newer generation of the phase was published (this one still counts)."""
        return int(self.state.get(self.gen_key) or 0) == self.generation

    def _renew(self) -> None:
        while True:
            try:
                if self.current():
                    self.state.put(self.key, self.value, ttl=self.seconds)
            except StoreError as err:
                log.warning("sync lease not renewed: %s", err)
            if self._stop.wait(self.seconds / 3):
                return

    def __enter__(self) -> Lease:
        self.state.put(self.key, self.value, ttl=self.seconds)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.state.get(self.key) == self.value:
            self.state.delete(self.key)


def run_sync(runtime: Runtime, job_id: str, generation: int) -> None:
    """The source phase of a sync job (the `cogmill.sync` task's body)."""
    jobs = tracker(runtime)
    job = jobs.get(job_id, live=False)
    state = runtime.state
    newer = int(state.get(GEN_PREFIX + job_id) or 0) != generation
    if job.status is not JobStatus.QUEUED or newer:
        return  # done, or a newer generation runs it
    if jobs.cancelled(job_id):
        jobs.finalise(job_id)  # cancelled before its source was read: nothing to undo
        return
    with Lease(state, job_id, generation, runtime.settings.sync_lease_seconds) as lease:
        try:
            outcome = mirror_source(runtime, job, lease)
        except (SourceError, CatalogError, KeyDeclarationError, OSError) as err:
            fail(runtime, job, str(err))
            return
        except StoreError:
            raise  # retried by the task
        except Exception as err:  # a job must end: a bug fails it (and is logged)
            log.exception("sync job %s failed", job_id)
            fail(runtime, job, f"unexpected error ({type(err).__name__}); see the worker log")
            return
        if outcome is None or not lease.current():
            return
        report, changed = outcome
        if jobs.cancelled(job_id):
            jobs.finalise(job_id)
            return
        sync = {**job.options[sync_cursor.SYNC], "report": report.counts()}
        options = {**job.options, sync_cursor.SYNC: sync}
        synced = f"synced {sync['name']}: {report.summary()}"
        update = {"options": options, "message": synced}
        run_job(runtime, job.model_copy(update=update), only=changed)


def mirror_source(runtime: Runtime, job: Job, lease: Lease) -> tuple[SyncReport, set[str]] | None:
    """Read the source and make the dataset mirror it; the report and the ids of the source's
    documents to cognify: the new and changed ones, and those an interrupted sync left
    unprocessed (None: superseded). A document that failed keeps its error until its content
    changes or a plain cognify retries it."""
    state, settings = runtime.state, runtime.settings
    source_id = str(sync_cursor.source_of(job))
    record = load_source(state, source_id)
    check_access(record.spec, settings, record.tenant, record.remote)
    mirror = Mirror(runtime.catalog, job.dataset, source_id, check_source)
    parent = Path(settings.home) / "sync" / "scratch"
    parent.mkdir(parents=True, exist_ok=True)
    with scratch_folder(parent) as folder:
        scratch = Scratch(Path(folder))

        def previous(name: str, digest: str) -> Path | None:
            return mirror.previous(name, digest, scratch.path())

        cursor = sync_cursor.cursor(state, source_id)
        listing = read_source(record.spec, cursor, settings, scratch, previous, source_id)
        if not lease.current():
            return None
        report = mirror.apply(listing, tenant_quota(runtime, record))
    state.put(f"job:{job.id}:sync", json.dumps(report.bounded()), ttl=None)
    sync_cursor.stage(state, job.id, listing.cursor, settings.artifact_ttl_seconds)
    tracker(runtime).event(job.id, "synced", **report.counts())
    added = DocumentStatus.ADDED.value
    todo = {d.id for d in mirror.stored().values() if d.properties.get(STATUS) == added}
    return report, todo


# The dataset registry of api/services/datasets.py (every use case that creates a dataset files
# its stored name there), read here by its key: a tenant's stored bytes are summed over it.
DATASETS = "api:datasets"


def tenant_quota(runtime: Runtime, record: SourceRecord) -> Callable[[int], None] | None:
    """The check of a tenant's storage quota (COGMILL_TENANT_STORAGE_BYTES) before a sync stores
    `incoming` bytes: SourceError when they would take it over (None: no quota applies)."""
    quota = runtime.settings.tenant_storage_bytes
    if record.tenant is None or not quota:
        return None
    prefix = f"{record.tenant}:"

    def check(incoming: int) -> None:
        names = runtime.state.add_members({DATASETS: []})[DATASETS] | {record.dataset}
        mine = sorted(n for n in names if n.startswith(prefix))
        used = runtime.graph.total(mine, DOCUMENT, "size")
        if used + incoming > quota:
            raise SourceError(
                f"this tenant stores {used} bytes of documents; the sync would add {incoming} "
                f"more, past its quota of {quota} (COGMILL_TENANT_STORAGE_BYTES): delete "
                "documents or narrow the source with include/exclude globs"
            )

    return check


def sync_report(state: StateStore, job_id: str) -> dict[str, Any] | None:
    """What a sync job's source phase did (counts and names), once it did it."""
    raw = state.get(f"job:{job_id}:sync")
    return json.loads(raw) if raw else None


def fail(runtime: Runtime, job: Job, message: str) -> None:
    """End a sync job in its source phase as failed (the cursor stays as it was)."""
    jobs = tracker(runtime)
    current = jobs.get(job.id, live=False)
    if current.status.finished:
        return
    update = {"status": JobStatus.FAILED, "message": message[:2000], "finished_at": utcnow()}
    jobs.save(current.model_copy(update=update))
    jobs.event(job.id, "finished", status=JobStatus.FAILED.value, message=message[:500])
