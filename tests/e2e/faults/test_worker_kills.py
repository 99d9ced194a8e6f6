"""Busy workers SIGKILLed (thread and prefork pools, llm and ingest queues) with the default
visibility timeout: every killed step is taken up again within a minute, and the job ends with
the stores exactly as the undisturbed run left them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.faults.conftest import check
from tests.e2e.faults.harness import RunResult, Stack
from tests.e2e.faults.kinds import recognify_with_kills, worker_kills
from tests.e2e.faults.scenario import run


@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_busy_workers_killed_lose_and_duplicate_nothing(
    pool: str,
    shared_stack: Stack,
    corpus: list[Path],
    dataset: str,
    fault_dir: Path,
    reference: RunResult,
) -> None:
    outcome = run(worker_kills(pool), shared_stack, corpus, dataset, fault_dir / pool, reference)
    check(outcome, kills=2)
    hit = [(k.what, k.step) for k in outcome.kills]
    assert [what for what, _ in hit] == [f"worker {pool} llm", f"worker {pool} ingest"], hit
    assert hit[0][1] == "extract_graph", hit
    recovered = outcome.result.event_count("batch_recovered")
    assert recovered >= 1, "no batch_recovered event: the kills were never taken up"


def test_workers_killed_during_a_recognify(
    shared_stack: Stack, corpus: list[Path], dataset: str, fault_dir: Path, reference: RunResult
) -> None:
    scenario = recognify_with_kills(2)
    outcome = run(scenario, shared_stack, corpus, dataset, fault_dir / "recognify", reference)
    check(outcome, kills=2)
