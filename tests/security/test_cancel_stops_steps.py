"""Cancelling a job stops its running step within seconds, and its parser child with it.

`POST /jobs/{id}/cancel` answered 202 but a step parsing a slow document ran on for minutes:
cancel was read only when a step started. A step now asks between documents, and the wait on
an isolated parser asks while the child parses (core/cancellation.py) and kills it. Here a
job's one batch holds two e-mails whose headers take the standard library's parser about
29 CPU-s each; the job is cancelled while the first is parsed, on real Celery worker threads
with the job state in Redis.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.models.jobs import JobStatus
from core.settings import Settings
from core.stores.redis.state import RedisStateStore
from runtime import Runtime
from tests import sample_files as sf
from tests.backends import (
    REDIS,
    add_files,
    finished,
    installed_runtime,
    redis_backend_of,
    worker_threads,
)
from workers.jobs import JobTracker
from workers.orchestration import cognify

pytestmark = [pytest.mark.integration, pytest.mark.services, pytest.mark.slow]

SLOW = sf.slow_eml_bytes(400_000)
# A check every second, then the rest of the chain passing nothing on; 10 s is a margin for a
# loaded machine, against the ~60 CPU-s the batch's two parses take when not stopped.
CANCEL_BOUND_S = 10.0


def parsing_children() -> set[int]:
    """Parser processes of this one that are running (state R): parsing, not idle."""
    busy = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        mine = int(fields[1]) == os.getpid() and b"pipelines.formats.isolated" in command
        if mine and fields[0] == "R":
            busy.add(int(stat.parent.name))
    return busy


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def wait_for(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def runtime(tmp_path: Path, models: dict[str, object]) -> Iterator[Runtime]:
    redis = redis_backend_of(REDIS)
    state = RedisStateStore(
        redis.url, prefix=redis.prefix, client=redis.adapter_client(decode_responses=True)
    )
    settings = Settings(home=tmp_path / "home", batch_size=4)
    with installed_runtime(settings, {**models, "state": state}) as rt:
        yield rt
    redis.clean()


def test_cancel_stops_a_slow_parse_within_seconds_and_stores_nothing(
    runtime: Runtime, tmp_path: Path
) -> None:
    files = {"slow-1.eml": SLOW, "slow-2.eml": SLOW + b"Bye.\n", "ok.eml": sf.eml_bytes()}
    paths = []
    for name, data in files.items():
        (path := tmp_path / name).write_bytes(data)
        paths.append(path)
    add_files(runtime, "mail", paths)
    with worker_threads(runtime):
        job = cognify(runtime, "mail")
        assert job.total_batches == 1
        assert wait_for(lambda: bool(parsing_children()), 120), "no parser started"
        [parser] = parsing_children()
        time.sleep(1)  # well into the first slow e-mail
        started = time.monotonic()
        JobTracker(runtime.state).cancel(job.id)
        ended = finished(runtime, job, 120)
        took = time.monotonic() - started
    print(f"\ncancel to cancelled: {took:.1f} s")
    assert ended.status is JobStatus.CANCELLED, ended
    assert took < CANCEL_BOUND_S, took
    assert not alive(parser), "the parser child was left running"
    # Nothing of the job is stored: no chunk, no document marked processed, no error.
    assert runtime.graph.find_nodes("mail", "DocumentChunk", limit=100) == []
    documents = runtime.graph.find_nodes("mail", "Document", limit=100)
    assert len(documents) == 3
    assert not [d for d in documents if d.properties.get("status") == "processed"]
    assert ended.errors == []
