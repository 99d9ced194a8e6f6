"""Session fixtures of the fault harness: one salted corpus, its undisturbed run, a checker."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.jobs import JobStatus
from tests.distributed import write_corpus
from tests.e2e.faults.harness import RunResult, Stack
from tests.e2e.faults.injectors import RECOVERY_TARGET_S
from tests.e2e.faults.scenario import Outcome, Scenario, cleanup, run
from tests.services import neo4j_uri, redis_database_url

CORPUS_SIZE = 12  # documents, one chunk each; batches of two: six batches of four steps


@pytest.fixture(scope="session")
def shared_stack() -> Stack:
    return Stack(redis_database_url("faults"), neo4j_uri())


@pytest.fixture(scope="session")
def fault_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Not pytest's tmp_path: its rotation (three runs kept) would delete a folder that worker
    processes still read while other test sessions start on the machine. Kept on failure
    (the worker logs are there)."""
    folder = Path(tempfile.mkdtemp(prefix="cogmill-faults-"))
    yield folder
    if request.session.testsfailed:
        print(f"fault harness: worker logs kept in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def corpus(fault_dir: Path) -> list[Path]:
    return write_corpus(fault_dir / "corpus", CORPUS_SIZE)


@pytest.fixture(scope="session")
def stacks_used(shared_stack: Stack) -> list[Stack]:
    """Stacks the dataset was written to (removed from the shared ones at the end)."""
    return [shared_stack]


@pytest.fixture(scope="session")
def dataset(fault_dir: Path, stacks_used: list[Stack]) -> Iterator[str]:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    yield name
    cleanup(stacks_used[0], name, fault_dir)


@pytest.fixture(scope="session")
def reference(shared_stack: Stack, corpus: list[Path], dataset: str, fault_dir: Path) -> RunResult:
    """The corpus run undisturbed, on the shared services."""
    outcome = run(Scenario("undisturbed"), shared_stack, corpus, dataset, fault_dir / "reference")
    result = outcome.result
    assert result.job.status is JobStatus.SUCCEEDED and not result.job.errors, result.job
    assert result.job.counts["documents"] == len(corpus)
    assert result.chat_calls() >= result.job.counts["chunks"] > 0, result.llm_stats
    return result


def check(outcome: Outcome, *, kills: int = 0) -> None:
    """The disturbed run ended like the undisturbed one: 0 lost, 0 duplicated, 0 changed, its
    LLM answered every chunk afresh, each fault was recovered from within the target (a killed
    server: from when it answered again)."""
    print(outcome.report())
    job = outcome.result.job
    assert job.status is JobStatus.SUCCEEDED and not job.errors, outcome.report()
    assert outcome.result.chat_calls() >= job.counts["chunks"] > 0, "the LLM cache answered"
    assert len(outcome.kills) >= kills, f"only {len(outcome.kills)} faults hit a running step"
    # A server's own restart time is not the system's: timed from when it answered again.
    slow = [
        k.describe() for k in outcome.kills if k.recovery is None or k.recovery > RECOVERY_TARGET_S
    ]
    assert not slow, f"recovery above {RECOVERY_TARGET_S:.0f}s: {slow}\n{outcome.report()}"
    assert outcome.diff is not None and outcome.diff.clean, outcome.report()
