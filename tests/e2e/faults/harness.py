"""Runs of one corpus in distributed mode: an undisturbed reference, then disturbed runs.

Every run gets a fresh Redis prefix (so an empty LLM cache, its own queues, job state and
postings) and the same dataset name; the previous run's data is removed from the graph and the
vectors, and the removal checked, before the next run starts. The worker processes and this
process's runtime are tests/distributed.py's, on the run's settings; the LLM and the
embeddings are the local test server with some latency.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from core.models.jobs import Job
from runtime import Runtime
from tests.distributed import worker_env
from tests.e2e.faults import stores
from tests.llm_server import LLMTestServer
from workers.jobs import JobTracker

EMBEDDING_DIM = 384  # the collections other tests made in the shared Neo4j are 384-d
LLM_LATENCY_MS = 300.0


@dataclass
class Stack:
    """The Redis (broker, state, postings) and Neo4j (graph, vectors) a run uses."""

    redis_url: str  # with its database number
    neo4j_uri: str


def run_env(stack: Stack, llm: LLMTestServer, home: Path, **settings: str) -> dict[str, str]:
    """COGMILL_* settings of one run, shared with its workers through the environment: the
    test LLM also for 384-d embeddings; `settings` as `worker_env` takes them."""
    return worker_env(
        home,
        stack.redis_url,
        stack.neo4j_uri,
        llm.base_url,
        **{"embedding_base_url": llm.base_url, "embedding_dim": str(EMBEDDING_DIM), **settings},
    )


def llm_server(**faults: Any) -> LLMTestServer:
    """The test LLM with latency and 384-d embeddings; `faults` as LLMTestServer takes them."""
    options = {"latency_ms": LLM_LATENCY_MS, "embedding_latency_ms": 20.0}
    return LLMTestServer(embedding_dim=EMBEDDING_DIM, **{**options, **faults})


def remove_dataset(runtime: Runtime, dataset: str, prefixes: list[str]) -> None:
    """Remove a dataset and check nothing of it is left in the graph, vectors or postings."""
    runtime.catalog.remove_dataset(dataset)
    settings = runtime.settings
    for prefix in prefixes:
        left = stores.take(
            settings.neo4j_uri or "", settings.redis_url or "", prefix, dataset, None
        )
        assert stores.is_empty(left), f"removing {dataset} left {left.sizes()} behind"


@dataclass
class RunResult:
    """A finished run: the job, what it left in the stores, the LLM's counters, timings."""

    job: Job
    snapshot: stores.Snapshot
    llm_stats: dict[str, Any]
    seconds: float
    prefix: str
    events: list[dict] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def chat_calls(self) -> int:
        return self.llm_stats["requests"].get("/v1/chat/completions", 0)

    def event_count(self, kind: str) -> int:
        return sum(1 for e in self.events if e.get("event") == kind)


def finish(
    runtime: Runtime, job: Job, llm: LLMTestServer, env: dict[str, str], started: float
) -> RunResult:
    """Snapshot a finished run (stores, job counts, events, LLM counters)."""
    s = runtime.settings
    prefix = env["COGMILL_REDIS_PREFIX"]
    snap = stores.take(s.neo4j_uri or "", s.redis_url or "", prefix, job.dataset, job)
    events = [e for _, e in JobTracker(runtime.state).events(job.id)]
    return RunResult(job, snap, llm.stats(), time.monotonic() - started, prefix, events)


def stuck_evidence(runtime: Runtime, job: Job) -> str:
    """Why a job may be stuck: each unrecorded batch's claim, generation and stored outputs,
    the messages in its queues and those delivered but not acknowledged (kombu's `unacked`)."""
    tracker = JobTracker(runtime.state)
    prefix = runtime.settings.redis_prefix
    lines = []
    claims = tracker.claims(job)
    for batch in range(job.total_batches):
        if tracker.batch_recorded(job.id, batch):
            continue
        outputs = sorted(
            key.rsplit(":", 1)[1]
            for key in runtime.state.keys(f"job:{job.id}:artifact:{batch}:")
            if key.count(":") == 4
        )
        lines.append(
            f"  batch {batch} unrecorded: claim {claims.get(batch)}, "
            f"gen {tracker.generation(job.id, batch)}, stored {outputs}"
        )
    with redis.Redis.from_url(runtime.settings.redis_url or "") as client:
        queued = {
            key.decode(errors="replace"): client.llen(key)
            for queue in ("ingest", "llm")
            for key in client.scan_iter(match=f"{prefix}{queue}*")
            if client.type(key) == b"list"  # priority lists; not the LLM cache's keys
        }
        lines.append(f"  queues {queued}")
        for tag, raw in client.hgetall(f"{prefix}unacked").items():
            message = json.loads(raw)[0]
            body = json.loads(base64.b64decode(message["body"]))
            kwargs = body[1] if len(body) > 1 else {}
            task = message.get("headers", {}).get("task")  # cogmill.<step>
            lines.append(f"  unacked {tag.decode()}: {task} {kwargs}")
    events = [e for _, e in tracker.events(job.id)][-8:]
    lines += [f"  event {e}" for e in events]
    return "\n".join(lines)
