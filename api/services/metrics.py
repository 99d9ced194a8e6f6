"""Prometheus metrics, derived at scrape time from the state store (what `GET /metrics` serves).

Job states, documents, batches, tokens and cost come from the job records and their usage
counters; step and search durations and LLM retries from the shared counters every process
adds to (workers/metrics.py), schedules' runs from theirs (workers/schedules.py); queue depths
from the broker. Nothing is held in one process's
memory, so any API process answers for the whole deployment, across machines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from celery import Celery
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from core.llm.usage import UsageTotals, priced
from core.models.jobs import Job, JobStatus
from runtime import Runtime
from workers.celery_app import queue_depths
from workers.jobs import JobTracker
from workers.metrics import (
    SEARCH_BUCKETS,
    STEP_BUCKETS,
    failed_batches,
    histograms,
    llm_counters,
)
from workers.retention import retired
from workers.schedules import totals as schedule_totals
from workers.usage import jobs_usage

TOKENS = ("prompt_tokens", "completion_tokens", "cached_tokens")


class StateCollector(Collector):
    """Reads the deployment's metrics from the state store and the broker on every collect."""

    def __init__(self, runtime: Runtime, app: Celery) -> None:
        self.runtime, self.app = runtime, app

    def collect(self) -> Iterator[Metric]:
        state = self.runtime.state
        jobs = list(JobTracker(state, self.runtime.settings.artifact_ttl_seconds).all())
        gone, gone_usage = retired(state)  # jobs deleted after the retention
        yield from _job_metrics(jobs, failed_batches(state), gone)
        usage = jobs_usage(state, [job.id for job in jobs])
        for kind, counts in gone_usage.items():
            usage[kind] = {name: value + counts[name] for name, value in usage[kind].items()}
        yield from _usage_metrics(usage, priced(usage, self.runtime.settings))
        retries = llm_counters(state)
        for name, doc in (
            ("retries", "LLM calls retried (429, 5xx, timeouts)"),
            ("rate_limited", "LLM calls answered 429 (each retried)"),
            ("failures", "LLM calls that failed for good"),
        ):
            yield CounterMetricFamily(f"cogmill_llm_{name}", doc, value=retries[name])
        yield _histogram(
            "cogmill_step_duration_seconds",
            "Step task durations",
            "step",
            histograms(state, "step", STEP_BUCKETS),
            STEP_BUCKETS,
        )
        yield _histogram(
            "cogmill_search_duration_seconds",
            "Search durations",
            "type",
            histograms(state, "search", SEARCH_BUCKETS),
            SEARCH_BUCKETS,
        )
        runs = CounterMetricFamily(
            "cogmill_schedule_runs",
            "Runs of schedules: fired by the beat, started, skipped (the previous run still "
            "going), missed (the beat was down)",
            labels=["outcome"],
        )
        for outcome, count in schedule_totals(state).items():
            runs.add_metric([outcome], count)
        yield runs
        depth = GaugeMetricFamily(
            "cogmill_queue_depth", "Messages waiting in a Celery queue", labels=["queue"]
        )
        for queue, size in queue_depths(self.app).items():
            depth.add_metric([queue], size)
        yield depth


def _job_metrics(jobs: Sequence[Job], failed: int, gone: dict[str, int]) -> Iterator[Metric]:
    by_state = Counter(job.status.value for job in jobs)
    gauge = GaugeMetricFamily("cogmill_jobs", "Cognify jobs by state", labels=["state"])
    for status in JobStatus:
        gauge.add_metric([status.value], by_state.get(status.value, 0))
    yield gauge
    documents = CounterMetricFamily(
        "cogmill_documents", "Documents processed or failed by jobs", labels=["outcome"]
    )
    processed = gone["documents"] + sum(job.counts.get("documents", 0) for job in jobs)
    failed_documents = sum(len({e.document_id for e in j.errors}) for j in jobs)
    documents.add_metric(["processed"], processed)
    documents.add_metric(["failed"], gone["documents_failed"] + failed_documents)
    yield documents
    batches = CounterMetricFamily(
        "cogmill_batches", "Batches of jobs (failed: every document an error)", labels=["outcome"]
    )
    planned = gone["batches_planned"] + sum(job.total_batches for job in jobs)
    done = gone["batches_done"] + sum(job.counts.get("batches_done", 0) for job in jobs)
    batches.add_metric(["planned"], planned)
    batches.add_metric(["done"], done)
    batches.add_metric(["failed"], failed)
    yield batches


def _usage_metrics(
    usage: dict[str, dict[str, int]], costs: dict[str, UsageTotals]
) -> Iterator[Metric]:
    """Calls, tokens, cost and cache hits of the jobs' LLM (kind llm) and embeddings calls."""
    calls = CounterMetricFamily("cogmill_model_calls", "Model calls sent", labels=["kind"])
    hits = CounterMetricFamily(
        "cogmill_model_cache_hits", "Calls answered by the response cache", labels=["kind"]
    )
    tokens = CounterMetricFamily("cogmill_model_tokens", "Tokens", labels=["kind", "type"])
    cost = CounterMetricFamily(
        "cogmill_model_cost_usd", "Cost at the settings' prices", labels=["kind"]
    )
    ratio = GaugeMetricFamily(
        "cogmill_model_cache_hit_ratio", "Cache hits / (calls + cache hits)", labels=["kind"]
    )
    for kind, counts in usage.items():
        calls.add_metric([kind], counts["calls"])
        hits.add_metric([kind], counts["cache_hits"])
        for name in TOKENS:
            tokens.add_metric([kind, name.removesuffix("_tokens")], counts[name])
        cost.add_metric([kind], costs[kind].cost_usd)
        asked = counts["calls"] + counts["cache_hits"]
        ratio.add_metric([kind], counts["cache_hits"] / asked if asked else 0.0)
    yield from (calls, hits, tokens, cost, ratio)


def _histogram(
    name: str,
    doc: str,
    label: str,
    found: dict[str, tuple[list[int], int, float]],
    bounds: Sequence[float],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=[label])
    for value, (cumulative, _count, total) in found.items():
        les = [*(str(b) for b in bounds), "+Inf"]
        family.add_metric([value], list(zip(les, cumulative, strict=True)), total)
    return family


def scrape(runtime: Runtime, app: Celery) -> bytes:
    """The deployment's metrics in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(runtime, app))
    return generate_latest(registry)
