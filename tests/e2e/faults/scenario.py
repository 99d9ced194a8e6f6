"""One run of the corpus under a fault, compared with the undisturbed run: the harness's verb.

reference = run(Scenario("undisturbed"), ...)          # no faults
outcome = run(Scenario("kills", chaos=kill_workers(3)), ..., reference=reference)
print(outcome.report())                                 # "0 lost, 0 duplicated, 0 changed"
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.models.jobs import Job
from runtime import Runtime
from tests.backends import JobStuckError, add_files, finished
from tests.distributed import WorkerPool, close_runtime, open_runtime
from tests.e2e.faults import stores
from tests.e2e.faults.harness import (
    RunResult,
    Stack,
    finish,
    llm_server,
    remove_dataset,
    run_env,
    stuck_evidence,
)
from tests.e2e.faults.injectors import Kill
from tests.llm_server import LLMTestServer
from workers.jobs import JobTracker
from workers.orchestration import cognify

Tick = Callable[[Job | None], None]
WorkerSpec = tuple[str, str, int]  # pool, queues, concurrency
BOTH_POOLS: list[WorkerSpec] = [("threads", "ingest,llm", 2), ("prefork", "ingest,llm", 2)]


@dataclass
class Context:
    """What a fault needs while the job runs."""

    runtime: Runtime
    workers: WorkerPool
    tracker: JobTracker
    llm: LLMTestServer
    rng: random.Random
    env: dict[str, str]
    corpus: list[Path] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)  # what a fault observed, for reports


@dataclass
class Scenario:
    """A run's workers, LLM faults, settings, and the fault injected while its job runs.

    `chaos(ctx)` returns the function called at every poll of the job (None: undisturbed);
    its `kills` attribute, if any, lists the faults it injected. `job(ctx)` starts the job
    (default: cognify the dataset); `after(ctx, result)` runs once the job ended.
    """

    name: str
    workers: list[WorkerSpec] = field(default_factory=lambda: list(BOTH_POOLS))
    llm_faults: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    chaos: Callable[[Context], Tick] | None = None
    add: Callable[[Context, str, list[Path]], None] | None = None
    job: Callable[[Context, str], Job] | None = None
    compare_job: bool = True  # False when the job ran on part of the corpus (disk full)
    timeout: float = 300.0
    seed: int | None = None


@dataclass
class Outcome:
    """A finished scenario: the run, its faults, and the comparison with the reference."""

    scenario: str
    result: RunResult
    kills: list[Kill]
    misses: int
    diff: stores.Diff | None

    def recoveries(self) -> list[float]:
        """Seconds from each fault (a server's return) until its batch moved on."""
        return [k.recovery for k in self.kills if k.recovery is not None]

    def report(self) -> str:
        job = self.result.job
        lines = [
            f"[{self.scenario}] job {job.status.value} in {self.result.seconds:.0f}s, "
            f"{job.counts.get('documents', 0)} documents, {job.counts.get('chunks', 0)} chunks, "
            f"{self.result.chat_calls()} LLM calls "
            f"({self.result.llm_stats['requests'].get('/v1/embeddings', 0)} embedding calls), "
            f"faults {self.result.llm_stats['faults']}, "
            f"{len(self.kills)} kills ({self.misses} missed a running step), "
            f"events recovered={self.result.event_count('batch_recovered')} "
            f"resumed={self.result.event_count('batch_resumed')}",
        ]
        lines += [f"  kill {k.describe()}" for k in self.kills]
        lines += [f"  {name}: {value}" for name, value in self.result.notes.items()]
        if self.diff is not None:
            lines.append("  " + self.diff.summary().replace("\n", "\n  "))
        return "\n".join(lines)


def run(
    scenario: Scenario,
    stack: Stack,
    corpus: list[Path],
    dataset: str,
    folder: Path,
    reference: RunResult | None = None,
) -> Outcome:
    """Clean the dataset, add the corpus, run the job under the scenario's fault, compare."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(scenario.seed if scenario.seed is not None else time.time_ns())
    with llm_server(**scenario.llm_faults) as llm:
        env = run_env(stack, llm, folder / "home", **scenario.settings)
        runtime = open_runtime(env)
        workers = WorkerPool(env, folder)
        try:
            remove_dataset(runtime, dataset, [env["COGMILL_REDIS_PREFIX"]])
            for pool, queues, concurrency in scenario.workers:
                workers.start(pool, queues, concurrency)
            tracker = JobTracker(runtime.state)
            ctx = Context(runtime, workers, tracker, llm, rng, env, list(corpus))
            if scenario.add is not None:
                scenario.add(ctx, dataset, corpus)
            else:
                report = add_files(runtime, dataset, corpus)
                assert not report.rejected, report
            tick = scenario.chaos(ctx) if scenario.chaos else None
            started = time.monotonic()
            job = scenario.job(ctx, dataset) if scenario.job else cognify(runtime, dataset)
            try:
                job = finished(
                    runtime, job, scenario.timeout, interval=0.2, on_tick=tick, outages=True
                )
                if (recovery := getattr(tick, "recovery", None)) is not None:
                    recovery.settle(job)
            except JobStuckError as err:
                done = "\n".join(f"  kill {k.describe()}" for k in getattr(tick, "kills", []))
                evidence = stuck_evidence(runtime, JobTracker(runtime.state).get(job.id))
                raise JobStuckError(f"[{scenario.name}] {err}\n{done}\n{evidence}") from None
            result = finish(runtime, job, llm, env, started)
        finally:
            workers.stop_all()
            close_runtime(runtime)
    kills = list(getattr(tick, "kills", []))
    misses = int(getattr(tick, "misses", 0))
    if getattr(tick, "replaced", 0):
        ctx.notes["workers_exited_and_replaced"] = tick.replaced  # type: ignore[union-attr]
    result.notes = ctx.notes
    diff = None
    if reference is not None:
        expected = reference.snapshot
        if not scenario.compare_job:
            expected = stores.Snapshot({k: v for k, v in expected.items.items() if k != "job"})
            result.snapshot.items.pop("job", None)
        diff = stores.compare(expected, result.snapshot)
    return Outcome(scenario.name, result, kills, misses, diff)


def cleanup(stack: Stack, dataset: str, folder: Path) -> None:
    """Remove the dataset from a stack (the end of a session)."""
    with llm_server() as llm:
        env = run_env(stack, llm, folder / "cleanup-home")
        runtime = open_runtime(env)
        try:
            runtime.catalog.remove_dataset(dataset)
        finally:
            close_runtime(runtime)
