"""What `GET /metrics` reports that job records do not hold, kept in the state store.

Every process adds to shared counters (Redis INCRBY distributed, a SQLite upsert embedded),
so an API process scraping reads what all workers on all machines did: no prometheus-client
multiprocess directory, nothing lost when a worker restarts. Recorded here:
- each step task's duration (a histogram per step: a counter per bucket, a count, a sum), from
  Celery's task_prerun/task_postrun signals in whichever worker ran it;
- each search's duration by search type (`observe_search`, called by the search use case);
- the LLM client's retries and 429s, added after every task from the process's client
  (`LLMStats` counts them in memory; the difference since the last task is added);
- the batches that failed whole (every document an error: a step failed for the batch), a set
  of `job:batch` filled as each batch's finish task ends (a redelivery adds nothing).
Job states, documents, batches, tokens and cost are read from the job records and the usage
counters (workers/jobs.py, workers/usage.py) at scrape time instead.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
import weakref
from collections.abc import Sequence

from celery.signals import task_postrun, task_prerun

from core.ports import StateStore, StoreError
from pipelines.models import WriteReport
from runtime import Runtime, current_runtime
from workers.celery_app import FINISH, TASK_STEPS, task_name

log = logging.getLogger("cogmill.metrics")

PREFIX = "metrics:"
STEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LLM_COUNTERS = ("retries", "rate_limited", "failures")
FAILED_BATCHES = PREFIX + "batches:failed"


def _histogram_key(family: str, label: str, *parts: str) -> str:
    return PREFIX + ":".join((family, label, *parts))


def observe(
    state: StateStore, family: str, label: str, seconds: float, buckets: Sequence[float]
) -> None:
    """Count one observation of `seconds` in the histogram `family`{label}: its bucket (the
    first bound at or above it; past the last: +Inf), the count and the sum (microseconds)."""
    index = bisect.bisect_left(buckets, seconds)
    state.incr_many(
        {
            _histogram_key(family, label, "bucket", str(index)): 1,
            _histogram_key(family, label, "count"): 1,
            _histogram_key(family, label, "sum_us"): max(0, round(seconds * 1e6)),
        }
    )
    state.add_member(PREFIX + family + ":labels", label)


def histograms(
    state: StateStore, family: str, buckets: Sequence[float]
) -> dict[str, tuple[list[int], int, float]]:
    """{label: (cumulative counts per bound and +Inf, count, sum in seconds)} of a family."""
    index = PREFIX + family + ":labels"
    labels = sorted(state.add_members({index: []})[index])
    found = {}
    for label in labels:
        keys = [_histogram_key(family, label, "bucket", str(i)) for i in range(len(buckets) + 1)]
        keys += [_histogram_key(family, label, "count"), _histogram_key(family, label, "sum_us")]
        values = [int(raw or 0) for raw in state.get_many(keys)]
        cumulative, total = [], 0
        for value in values[: len(buckets) + 1]:
            total += value
            cumulative.append(total)
        found[label] = (cumulative, values[-2], values[-1] / 1e6)
    return found


def observe_search(runtime: Runtime, search_type: str, seconds: float) -> None:
    """Count a search's duration (`cogmill_search_duration_seconds`) and its LLM retries; a
    store error only logs: a search must not fail for its metric."""
    try:
        observe(runtime.state, "search", search_type, seconds, SEARCH_BUCKETS)
        flush_llm_counters(runtime)
    except StoreError as err:
        log.warning("search metric lost: %s", err)


def llm_counters(state: StateStore) -> dict[str, int]:
    """The LLM retries, 429s and failed calls all processes counted."""
    values = state.get_many([PREFIX + "llm:" + name for name in LLM_COUNTERS])
    return {name: int(raw or 0) for name, raw in zip(LLM_COUNTERS, values, strict=True)}


def failed_batches(state: StateStore) -> int:
    """How many batches failed whole, over all jobs."""
    return state.count_members(FAILED_BATCHES)


def _count_failed_batch(state: StateStore, kwargs: dict[str, object]) -> None:
    """After a batch's finish task: note the batch if its report has errors only."""
    job_id, batch = kwargs.get("job_id"), kwargs.get("batch")
    raw = state.get(f"job:{job_id}:report:{batch}")  # JobTracker.finish_batch's report key
    if raw is not None:
        report = WriteReport.model_validate_json(raw)
        if report.errors and not report.documents:
            state.add_member(FAILED_BATCHES, f"{job_id}:{batch}")


# -- recording in workers ---------------------------------------------------------------------

_started: dict[str, float] = {}  # task id -> perf_counter at prerun
# Each LLM client's counters when last added (weak: a closed runtime's client goes with it).
_flushed: weakref.WeakKeyDictionary[object, dict[str, int]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@task_prerun.connect
def _task_started(task_id: str | None = None, task: object = None, **_: object) -> None:
    if task_id is not None and getattr(task, "name", None) in TASK_STEPS:
        with _lock:
            _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_ended(
    task_id: str | None = None,
    task: object = None,
    kwargs: dict[str, object] | None = None,
    **_: object,
) -> None:
    with _lock:
        started = _started.pop(task_id or "", None)
    try:
        runtime = current_runtime()
        if started is not None:
            step = TASK_STEPS[getattr(task, "name", "")]
            observe(runtime.state, "step", step, time.perf_counter() - started, STEP_BUCKETS)
        if getattr(task, "name", None) == task_name(FINISH) and kwargs:
            _count_failed_batch(runtime.state, kwargs)
        flush_llm_counters(runtime)
    except StoreError as err:
        log.warning("task metrics lost: %s", err)


def flush_llm_counters(runtime: Runtime) -> None:
    """Add what this process's LLM client counted since the last flush to the shared
    counters (nothing when no client was made yet)."""
    client = vars(runtime).get("llm")  # the cached property's value, without making one
    if client is None:
        return
    now = client.stats.snapshot()
    with _lock:
        before = _flushed.get(client, {})
        _flushed[client] = {name: now.get(name, 0) for name in LLM_COUNTERS}
    deltas = {name: now.get(name, 0) - before.get(name, 0) for name in LLM_COUNTERS}
    runtime.state.incr_many({PREFIX + "llm:" + k: v for k, v in deltas.items() if v > 0})
