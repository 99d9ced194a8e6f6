"""Job bookkeeping on the state store: records, idempotent batch completion, events, cancel.

Counts are never incremented in place: each finished batch stores its WriteReport under its
own key and is added to the job's "done" set, so a redelivered task cannot count twice and a
crash between the two writes only repeats an idempotent write. A finished job's entity and
relationship counts are then the graph's (workers/job_counts.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence

from core.errors import NotFound
from core.migrations import once
from core.models.jobs import Claim, DocumentError, Job, JobStatus, utcnow
from core.ports import GraphReader, StateStore
from core.sequences import batched
from pipelines.models import WriteReport
from workers import job_counts
from workers.job_keys import batch_input_key, job_key, step_output_key
from workers.sync_cursor import keep as keep_sync_cursor
from workers.webhooks.deliveries import announce

COUNTED = ("documents", "chunks", "entities", "relationships", "vectors")
# Summed over the batches as they are, e.g. the graph write rate inside the pipeline.
SUMMED = ("nodes_written", "edges_written", "graph_write_ms")
_REPORTS_PER_READ = 1000
RUNNING = "jobs:running"  # the ids of unfinished jobs, which the sweeper watches
# The ids of every job, so listing jobs reads them and not the keyspace: a key scan walks every
# key of the store (Redis has no other way), among them 3 usage counters per document a job
# read, the LLM cache and the lexical index. `INDEXED` marks a store whose older jobs are in.
JOBS = "jobs:all"
INDEXED = "jobs:all:complete"


class JobNotFoundError(NotFound):
    """No job with that id (or another tenant's)."""

    code = "job_not_found"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r}")
        self.job_id = job_id


class ArtifactMissingError(NotFound):
    """A job's stored input or output is gone (expired, or the job was cleaned up)."""

    code = "artifact_missing"


class JobTracker:
    """Reads and writes job state; every method is safe to repeat."""

    def __init__(
        self, state: StateStore, artifact_ttl: int = 86_400, graph: GraphReader | None = None
    ) -> None:
        self.state = state
        self.artifact_ttl = artifact_ttl
        # With the graph, a job's final counts are the graph's (workers/job_counts.py).
        self.graph = graph

    def save(self, job: Job) -> None:
        self.state.add_member(JOBS, job.id)
        # A sync's cursor first: whoever sees the job succeeded finds the source's new cursor.
        keep_sync_cursor(self.state, job)
        self.state.put(job_key(job.id), job.model_dump_json())
        if job.status.finished:
            self.state.remove_member(RUNNING, job.id)
            announce(self.state, job)  # its webhooks, once per finished status
        else:
            self.state.add_member(RUNNING, job.id)

    def running(self) -> list[Job]:
        """Unfinished jobs, without reading every job ever run (a paused job is not one)."""
        jobs = []
        for job_id in sorted(self.state.add_members({RUNNING: []})[RUNNING]):
            try:
                job = self.get(job_id, live=False)
            except JobNotFoundError:
                job = None
            if job is None or job.status.finished:
                self.state.remove_member(RUNNING, job_id)  # a finalise the store lost
            else:
                jobs.append(job)
        return jobs

    def get(self, job_id: str, *, live: bool = True) -> Job:
        """The job with live counts and errors (`live=False`: as planned, without reading every
        batch's report, for steps that need only its dataset or options). Raises
        JobNotFoundError."""
        raw = self.state.get(job_key(job_id))
        if raw is None:
            raise JobNotFoundError(job_id)
        return self._read(raw, live)

    def _read(self, raw: str, live: bool) -> Job:
        job = Job.model_validate_json(raw)
        if live and not job.status.finished:
            job.counts, errors, _ = self._totals(job)
            job.errors = job.errors + errors
        return job

    def ids(self) -> set[str]:
        """Every job's id, from their index (`JOBS`)."""
        once(self.state, INDEXED, self._index_older_jobs)
        return self.state.add_members({JOBS: []})[JOBS]

    def all(self, *, live: bool = True) -> Iterator[Job]:
        """Every job, from the index of their ids (`JOBS`), read many at a time."""
        for part in batched(sorted(self.ids()), _REPORTS_PER_READ):
            for raw in self.state.get_many([job_key(job_id) for job_id in part]):
                if raw is not None:
                    yield self._read(raw, live)

    def _index_older_jobs(self) -> None:
        """Jobs saved before the index existed, found by a key scan."""
        found = [key.split(":", 1)[1] for key in self.state.keys("job:") if key.count(":") == 1]
        if found:
            self.state.add_members({JOBS: found})

    def put_artifact(self, job_id: str, name: str, value: str) -> str:
        key = job_key(job_id, "artifact", name)
        self.state.put(key, value, ttl=self.artifact_ttl)
        return key

    def artifact(self, key: str) -> str:
        value = self.state.get(key)
        if value is None:
            raise ArtifactMissingError(
                f"artifact {key} is missing (expired or the job was cleaned up)"
            )
        return value

    def count_delivery(self, job_id: str, batch: int, step: str) -> int:
        """Count one start of a batch step (a retry or a redelivery after a crash)."""
        key = job_key(job_id, "artifact", str(batch), step, "deliveries")
        return self.state.incr(key)

    def claim(self, job_id: str, batch: int, claim: Claim) -> None:
        """Record who runs (state running) or ran (state done) the batch's current step."""
        key = job_key(job_id, "artifact", str(batch), "claim")
        self.state.put(key, claim.model_dump_json(), ttl=self.artifact_ttl)

    def unclaim(self, job_id: str, batch: int) -> None:
        """Forget the batch's claim: its step went back to the queue without running."""
        self.state.delete(job_key(job_id, "artifact", str(batch), "claim"))

    def claims(self, job: Job) -> dict[int, Claim]:
        """The last claim of every batch of the job that has one."""
        keys = [
            job_key(job.id, "artifact", str(batch), "claim") for batch in range(job.total_batches)
        ]
        found: dict[int, Claim] = {}
        for start, part in enumerate(batched(keys, _REPORTS_PER_READ)):
            for offset, raw in enumerate(self.state.get_many(part)):
                if raw is not None:
                    found[start * _REPORTS_PER_READ + offset] = Claim.model_validate_json(raw)
        return found

    def generation(self, job_id: str, batch: int) -> int:
        """How often the batch was re-published by the sweeper (0: never)."""
        return int(self.state.get(job_key(job_id, "artifact", str(batch), "gen")) or 0)

    def next_generation(self, job_id: str, batch: int) -> int:
        """Start a new generation of the batch: deliveries of older ones become no-ops."""
        return self.state.incr(job_key(job_id, "artifact", str(batch), "gen"))

    def position(self, job_id: str, batch: int) -> tuple[bool, int, Claim | None]:
        """Whether the batch is recorded, its generation and its last claim (one round trip)."""
        recorded, gen, claim = self.state.get_many(
            [
                job_key(job_id, "recorded", str(batch)),
                job_key(job_id, "artifact", str(batch), "gen"),
                job_key(job_id, "artifact", str(batch), "claim"),
            ]
        )
        return (
            recorded is not None,
            int(gen or 0),
            Claim.model_validate_json(claim) if claim is not None else None,
        )

    def finish_batch(
        self, job_id: str, batch: int, report: WriteReport, steps: Sequence[str] = ()
    ) -> bool:
        """Record a batch's report, then drop its input and the outputs of `steps` (its
        pipeline's); True when this call completed the job's last batch."""
        # Without the entity and alias names (for reconcile_entities only): every progress
        # poll reads this.
        stored = report.model_dump_json(exclude={"entity_names", "alias_names"})
        self.state.put(job_key(job_id, "report", str(batch)), stored)
        recorded = job_key(job_id, "recorded", str(batch))
        # The event before the "done" set: whoever completes the set (and so writes `finished`)
        # comes after every batch's `batch_done`, so a stream that ends at `finished` has them
        # all. A crash before the marker below repeats the event on redelivery, never loses it.
        if self.state.get(recorded) is None:
            self.event(
                job_id,
                "batch_done",
                batch=batch,
                documents=len(report.documents),
                errors=len(report.errors),
            )
        self.state.add_member(job_key(job_id, "done"), str(batch))
        # Last: a batch counts as recorded (for redeliveries and the sweeper) only once it is
        # in the "done" set; a crash before this line lets the batch be recorded again.
        self.state.put(recorded, "1")
        self.drop_batch_artifacts(job_id, batch, steps)
        return self.settled(job_id)

    def drop_batch_artifacts(self, job_id: str, batch: int, steps: Sequence[str]) -> None:
        """A recorded batch's input, step outputs and delivery bookkeeping. No delivery reads
        them again (each finds the batch recorded first), so they go now, not with the job:
        a job holds the artifacts of its batches in flight, not of every batch it ran (a 4x
        run's grew Redis by some 200 MiB before the job's end dropped them)."""
        keys = [batch_input_key(job_id, batch)]
        keys += [job_key(job_id, "artifact", str(batch), part) for part in ("claim", "gen")]
        for step in steps:
            output = step_output_key(job_id, batch, step)
            keys += [output, f"{output}:deliveries", f"{output}:llm-batch"]
        self.state.delete(*keys)

    def settled(self, job_id: str) -> bool:
        """Whether every batch of the job is recorded or parked (then it can be finalised)."""
        job = Job.model_validate_json(self.state.get(job_key(job_id)) or "{}")
        done = self.state.count_members(job_key(job_id, "done"))
        return done + self.state.count_members(job_key(job_id, "parked")) >= job.total_batches

    def park(self, job_id: str, batch: int, step: str) -> None:
        """Keep a batch whose `step` the budget refused for `jobs resume` (its stored inputs
        stay); the sweeper leaves it alone meanwhile."""
        if self.state.add_member(job_key(job_id, "parked"), str(batch)):
            self.event(job_id, "batch_paused", batch=batch, step=step)

    def parked(self, job_id: str) -> set[int]:
        """The batches parked until the job resumes."""
        key = job_key(job_id, "parked")
        return {int(b) for b in self.state.add_members({key: []})[key]}

    def unpark(self, job_id: str, batch: int) -> None:
        self.state.remove_member(job_key(job_id, "parked"), str(batch))

    def llm_waiting(self, job_id: str) -> set[int]:
        """The batches waiting for the Batch API's answers (workers/llm_batches/): no
        worker holds them, and the sweeper leaves them alone; the job stays running."""
        key = job_key(job_id, "llm-waiting")
        return {int(b) for b in self.state.add_members({key: []})[key]}

    def wait_llm(self, job_id: str, batch: int, waiting: bool = True) -> None:
        """Mark the batch as waiting for the Batch API (`waiting=False`: no longer)."""
        change = self.state.add_member if waiting else self.state.remove_member
        change(job_key(job_id, "llm-waiting"), str(batch))

    def touch(self, job_id: str) -> None:
        """Note that the job made progress now (the sweeper resumes jobs that stop doing so)."""
        self.state.put(job_key(job_id, "progress"), str(time.time()), ttl=self.artifact_ttl)

    def last_progress(self, job: Job) -> float:
        raw = self.state.get(job_key(job.id, "progress"))
        return float(raw) if raw is not None else job.created_at.timestamp()

    def unfinished_batches(self, job: Job) -> list[int]:
        """Batches not recorded yet, except held ones not released (nothing may start them)."""
        held = set(json.loads(self.state.get(job_key(job.id, "held")) or "[]"))
        # They wait for `jobs resume` or for the Batch API, not for a worker.
        parked = self.parked(job.id) | self.llm_waiting(job.id)
        return [
            batch
            for batch in range(job.total_batches)
            if not self.batch_recorded(job.id, batch)
            and batch not in parked
            and (batch not in held or self.state.get(job_key(job.id, "released", str(batch))))
        ]

    def hold(self, job_id: str, batches: list[int]) -> None:
        """Batches enqueued only once `release`d: a large document's later segments, which must
        not write before its first segment's write purged the document's older data."""
        if batches:
            self.state.put(job_key(job_id, "held"), json.dumps(sorted(batches)))

    def held_back(self, job_id: str) -> set[int]:
        """The held batches not released yet."""
        held = json.loads(self.state.get(job_key(job_id, "held")) or "[]")
        return {b for b in held if self.state.get(job_key(job_id, "released", str(b))) is None}

    def release(self, job_id: str, batch: int) -> bool:
        """Release a held batch; True only the first time, so its chain is enqueued once."""
        return self.state.incr(job_key(job_id, "released", str(batch))) == 1

    def batch_recorded(self, job_id: str, batch: int) -> bool:
        return self.state.get(job_key(job_id, "recorded", str(batch))) is not None

    def batches_done(self, job_id: str) -> int:
        return self.state.count_members(job_key(job_id, "done"))

    def finalise(self, job_id: str) -> Job:
        """Fix the job's final counts and status, and drop its intermediate artifacts."""
        job = Job.model_validate_json(self.state.get(job_key(job_id)) or "{}")
        if job.status.finished:
            return job
        job.counts, errors, documents = self._totals(job)
        job.errors = job.errors + errors
        if self.graph is not None and documents:
            kept = job_counts.stored(self.graph, job.dataset, sorted(documents))
            job.counts = job_counts.settle(job.counts, kept)
        paused = False
        if self.cancelled(job_id):
            job.status = JobStatus.CANCELLED
        elif paused := bool(self.state.count_members(job_key(job_id, "parked"))):
            job.status = JobStatus.PAUSED_BUDGET
            job.message = (
                "budget reached (each LLM request sets aside its prompt and up to "
                "COGMILL_LLM_MAX_COMPLETION_TOKENS of reply until it is answered): the parked "
                f"batches wait; `cogmill jobs resume {job_id} --budget-usd X` (or POST "
                f"/api/v1/jobs/{job_id}/resume) continues"
            )
        elif (
            job.total_documents and len({e.document_id for e in job.errors}) >= job.total_documents
        ):
            job.status = JobStatus.FAILED
            job.message = "every document failed; see the errors"
        else:
            job.status = JobStatus.SUCCEEDED
        job.finished_at = utcnow()
        self.save(job)
        if paused:  # not `finished`: a watcher of the resumed job must not stop at it
            self.event(job_id, "paused", status=job.status.value)
            return job  # the parked batches' inputs are kept for the resume
        self.event(job_id, "finished", status=job.status.value)
        for key in self.state.keys(job_key(job_id, "artifact", "")):
            self.state.delete(key)
        return job

    def _totals(self, job: Job) -> tuple[dict[str, int], list[DocumentError], set[str]]:
        """The batches' reports summed, their errors, and the documents they wrote."""
        counts = dict.fromkeys(COUNTED + SUMMED, 0)
        errors: list[DocumentError] = []
        # Distinct ids: a large document's segments are reported by several batches.
        documents: set[str] = set()
        # By batch number, not by a key scan: a scan walks the whole keyspace (LLM cache and
        # all), and jobs are read on every progress poll; many reports per round trip.
        keys = [job_key(job.id, "report", str(batch)) for batch in range(job.total_batches)]
        for part in batched(keys, _REPORTS_PER_READ):
            for raw in self.state.get_many(part):
                if raw is None:
                    continue
                report = WriteReport.model_validate_json(raw)
                documents.update(report.documents)
                for name in COUNTED[1:] + SUMMED:
                    counts[name] += getattr(report, name)
                errors.extend(report.errors)
        counts["documents"] = len(documents - {e.document_id for e in errors})
        counts["batches_done"] = self.batches_done(job.id)
        return counts, errors, documents

    def cancel(self, job_id: str) -> Job:
        """Ask running work to stop; queued batches are skipped when they start."""
        job = self.get(job_id)
        if job.status is JobStatus.PAUSED_BUDGET:  # nothing runs: it ends here
            self.state.put(job_key(job_id, "cancel"), "1")
            self.event(job_id, "cancel_requested")
            # Back to running for finalise (which ends only running jobs), without the errors
            # its pause merged in (finalise adds the batches' errors again).
            job.status, job.errors = JobStatus.RUNNING, []
            self.state.put(job_key(job_id), job.model_dump_json())
            return self.finalise(job_id)
        if not job.status.finished:
            self.state.put(job_key(job_id, "cancel"), "1")
            self.event(job_id, "cancel_requested")
        return job

    def abandon(self, job_id: str, message: str) -> Job:
        """End a job whose batches could not all be queued: any that went out skip their steps
        (as after a cancel), and the job is failed with `message`, so nothing waits for it."""
        self.state.put(job_key(job_id, "cancel"), "1")
        job = self.get(job_id, live=False)
        job.status, job.message, job.finished_at = JobStatus.FAILED, message, utcnow()
        self.save(job)
        self.event(job_id, "finished", status=job.status.value)
        return job

    def cancelled(self, job_id: str) -> bool:
        return self.state.get(job_key(job_id, "cancel")) is not None

    def event(self, job_id: str, kind: str, **fields: object) -> None:
        payload = {"event": kind, "at": utcnow().isoformat(), **fields}
        self.state.append_event(job_key(job_id, "events"), json.dumps(payload))

    def events(self, job_id: str, after: int = 0) -> list[tuple[int, dict]]:
        return [
            (seq, json.loads(raw))
            for seq, raw in self.state.read_events(job_key(job_id, "events"), after=after)
        ]
