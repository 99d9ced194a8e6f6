"""Each pipeline step is its own Celery task, `cogmill.<step>`: registered from the step
registry, routed to the queue the step declares, and seen by name in Celery's events (as
Flower shows them) with the job, dataset, pipeline, batch and document count in its arguments.
"""

from __future__ import annotations

import ast
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from celery import Celery

from pipelines.base import INGEST, LLM, Pipeline
from pipelines.classify import Classify
from pipelines.definitions import PIPELINES, STEPS
from pipelines.models import DocumentBatch
from tests.backends import add_files, finished, write_files
from tests.distributed import distributed_runtime, running_workers, worker_env
from tests.llm_server import LLMTestServer
from tests.services import neo4j_uri, redis_database_url
from workers.celery_app import app, task_name
from workers.orchestration import cognify
from workers.tasks import STEP_TASKS

FINISH = "cogmill.finish_batch"


def test_every_step_of_every_pipeline_has_its_own_task_on_its_queue() -> None:
    app.loader.import_default_modules()  # the app's `include`, as a worker process imports it
    routes = app.conf.task_routes
    for pipeline in PIPELINES.values():
        for step in pipeline.steps:
            name = f"cogmill.{step.name}"
            assert name in app.tasks, f"{pipeline.name}: no task for step {step.name}"
            assert routes[name] == {"queue": step.queue}, name
            assert STEP_TASKS[step.name].name == name
    registered = {name for name in app.tasks if name.startswith("cogmill.")}
    # Besides the steps: the end of a batch, a finished job's webhook delivery, a sync's source
    # phase and a schedule's run.
    others = {FINISH, *(task_name(name) for name in ("deliver_webhook", "sync", "scheduled_run"))}
    assert registered == {f"cogmill.{name}" for name in STEPS} | others
    assert all(routes[name] == {"queue": INGEST} for name in others)
    # The steps that wait on the LLM have their own queue, to be scaled and rate-limited apart.
    llm_steps = {name for name, step in STEPS.items() if step.queue == LLM}
    assert llm_steps == {"extract_graph", "summarize_documents", "extract_events", "judge_facts"}


class _NoBuild:
    name: ClassVar[str] = "no_build"
    queue: ClassVar[str] = INGEST

    def run(self, batch: DocumentBatch) -> DocumentBatch:
        return batch


class _OffQueue(Classify):
    queue = "gpu"  # type: ignore[assignment]


def test_a_step_that_cannot_be_built_or_routed_fails_when_its_pipeline_is_defined() -> None:
    with pytest.raises(TypeError, match=r"_NoBuild must define `build\(cls, services, context\)`"):
        Pipeline("broken", "1", [_NoBuild])
    with pytest.raises(TypeError, match="_OffQueue must declare `queue` as one of ingest, llm"):
        Pipeline("broken", "1", [_OffQueue])
    with pytest.raises(ValueError, match="names a step twice"):
        Pipeline("broken", "1", [Classify, Classify])


class TaskEvents:
    """Celery's task events (what Flower shows), captured from the broker in a thread."""

    def __init__(self, celery: Celery) -> None:
        self.app, self.events, self.heard = celery, list[dict[str, Any]](), threading.Event()
        self._receiver: Any = None
        self._thread = threading.Thread(target=self._capture, name="task-events", daemon=True)

    def _capture(self) -> None:
        with self.app.connection_for_read() as conn:
            self._receiver = self.app.events.Receiver(conn, handlers={"*": self._on_event})
            self._receiver.capture(limit=None, timeout=None, wakeup=True)

    def _on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.heard.set()

    def __enter__(self) -> TaskEvents:
        self._thread.start()
        # Listening once a worker's heartbeat (asked for by `wakeup`, sent every 2 s) arrives.
        assert self.heard.wait(120), "no Celery event within 120 s: are worker events on?"
        return self

    def __exit__(self, *_: object) -> None:
        if self._receiver is not None:
            self._receiver.should_stop = True
        self._thread.join(30)

    def of_job(self, job_id: str, kind: str) -> list[dict[str, Any]]:
        """The job's events of one kind, each with its keyword arguments parsed."""
        found = []
        for event in list(self.events):
            if event.get("type") != kind or not event.get("name", "").startswith("cogmill."):
                continue
            kwargs = ast.literal_eval(event["kwargs"])
            if kwargs.get("job_id") == job_id:
                found.append({**event, "kwargs": kwargs})
        return found


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with LLMTestServer(latency_ms=50) as llm:
        broker = redis_database_url("step_tasks")
        yield worker_env(tmp_path_factory.mktemp("home"), broker, neo4j_uri(), llm.base_url)


FILES = {
    "ada.txt": "Ada Lovelace met Charles Babbage in London.\n\nShe wrote notes on the Engine.",
    "grace.txt": "Grace Hopper built a compiler.\n\nAlan Turing wrote about machines.",
    "history.txt": "On 5 June 1843 Ada Lovelace sent her notes to Charles Babbage.",
    "customers.csv": "customer_id,name\nC1,Alice\nC2,Bruno\n",
    "orders.csv": "order_id,customer_id\n1,C2\n2,C1\n",
}
PIPELINE_OF = {"history.txt": "temporal"}  # the csv files go through `structured` on their own


@pytest.mark.services
@pytest.mark.slow  # a worker process
def test_a_jobs_tasks_are_named_by_step_with_job_dataset_and_batch(
    env: dict[str, str], tmp_path: Path
) -> None:
    salt = uuid.uuid4().hex[:8]
    paths = write_files(tmp_path / "docs", {n: f"{t}\n\nNote {salt}." for n, t in FILES.items()})
    with distributed_runtime(env) as rt, running_workers(env, tmp_path, count=1):
        dataset = f"tasks-{salt}"
        for path in paths:
            report = add_files(rt, dataset, [path], pipeline=PIPELINE_OF.get(path.name))
            assert not report.rejected, report
        try:
            with TaskEvents(app) as events:
                job = finished(rt, cognify(rt, dataset), timeout=300)
                # Every received task also ends: its success event follows shortly.
                done = _wait_for(lambda: _succeeded(events, events.of_job(job.id, "task-received")))
                received = events.of_job(job.id, "task-received")
        finally:
            rt.catalog.remove_dataset(dataset)
    assert job.status.value == "succeeded" and not job.errors, job
    assert done, "some received tasks never succeeded"
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for event in sorted(received, key=lambda e: e["timestamp"]):
        by_batch.setdefault(event["kwargs"]["batch"], []).append(event)
    assert sorted(by_batch) == list(range(job.total_batches))
    pipelines_run, documents = set(), 0
    for batch, events_of_batch in by_batch.items():
        kwargs = events_of_batch[0]["kwargs"]
        pipeline = PIPELINES[kwargs["pipeline"]]
        pipelines_run.add(pipeline.name)
        names = list(dict.fromkeys(e["name"] for e in events_of_batch))  # in order, once each
        assert names == [f"cogmill.{s}" for s in pipeline.step_names] + [FINISH], (batch, names)
        documents += kwargs["documents"]
        for event in events_of_batch:
            assert event["kwargs"] == {**kwargs, "gen": 0}, (event["name"], event["kwargs"])
            assert (event["kwargs"]["dataset"], event["kwargs"]["batch"]) == (dataset, batch)
    assert pipelines_run == {"default", "temporal", "structured"}
    assert documents == job.total_documents == len(FILES)
    seen = {e["name"] for e in received}
    assert seen == {f"cogmill.{name}" for name in STEPS} | {FINISH}
    assert "cogmill.run_step" not in seen


def _succeeded(events: TaskEvents, received: list[dict[str, Any]]) -> bool:
    """Whether every received task has its task-succeeded event."""
    ok = {e["uuid"] for e in list(events.events) if e.get("type") == "task-succeeded"}
    return all(e["uuid"] in ok for e in received)


def _wait_for(check: Callable[[], bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
