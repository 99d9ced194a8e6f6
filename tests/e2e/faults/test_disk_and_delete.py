"""A full disk under the blob store, and a delete SIGKILLed half way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.faults.conftest import check
from tests.e2e.faults.harness import RunResult, Stack
from tests.e2e.faults.kinds import FullDisk, delete_with_kill, disk_full
from tests.e2e.faults.scenario import run


@pytest.fixture
def full_disk() -> Iterator[FullDisk]:
    if (why := FullDisk.available()) is not None:
        pytest.skip(f"no small filesystem can be mounted for the blob store here: {why}")
    disk = FullDisk(free_pages=5)
    yield disk
    disk.close()


def test_a_full_blob_disk_refuses_adds_cleanly_and_loses_nothing(
    full_disk: FullDisk,
    shared_stack: Stack,
    corpus: list[Path],
    dataset: str,
    fault_dir: Path,
    reference: RunResult,
) -> None:
    scenario = disk_full(full_disk)
    outcome = run(scenario, shared_stack, corpus, dataset, fault_dir / "disk", reference)
    check(outcome)
    # The error says where and what to do (core/stores/blob_fs.py).
    assert "no space left for stored files under" in full_disk.errors[0], full_disk.errors
    assert "COGMILL_HOME" in full_disk.errors[0], full_disk.errors


def test_a_delete_killed_half_way_then_repeated_leaves_nothing(
    shared_stack: Stack, corpus: list[Path], dataset: str, fault_dir: Path, reference: RunResult
) -> None:
    scenario = delete_with_kill()
    outcome = run(scenario, shared_stack, corpus, dataset, fault_dir / "delete", reference)
    check(outcome)
    [killed] = outcome.result.notes["deletes_killed"]
    assert killed["at_kill"] != killed["before"] and any(killed["at_kill"]), killed
