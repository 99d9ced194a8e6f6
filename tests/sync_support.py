"""What the sync tests share: run a sync to its end, and compare a dataset synced step by step
with a fresh sync of the source's final state into the same dataset name."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from api.services.delete import delete_dataset
from api.services.sync import sync
from core.models.jobs import Job, JobStatus
from pipelines.sources import SourceSpec
from runtime import Runtime
from tests.backends import Backend, finished
from tests.dataset_snapshot import dataset_snapshot, differences
from workers import sync_cursor
from workers.sync import sync_report


def synced(rt: Runtime, dataset: str, spec: SourceSpec, timeout: float = 180) -> Job:
    """Sync the dataset with the source and wait for the job; it must succeed."""
    job = finished(rt, sync(rt, dataset, spec), timeout)
    assert job.status is JobStatus.SUCCEEDED, job
    return job


def report(rt: Runtime, job: Job) -> dict[str, Any]:
    found = sync_report(rt.state, job.id)
    assert found is not None, job
    return found


def same_as_fresh(backend: Backend, rt: Runtime, dataset: str, spec: SourceSpec) -> None:
    """The dataset equals, node for node and vector for vector, a fresh sync of the source
    (the dataset deleted and the source's cursor forgotten first)."""
    kept = dataset_snapshot(backend, rt, dataset)
    assert kept.get("node") and kept.get("vector"), kept.keys()
    delete_dataset(rt, dataset)
    sync_cursor.forget(rt.state, spec.identity(dataset))
    assert not dataset_snapshot(backend, rt, dataset)
    synced(rt, dataset, spec)
    fresh = dataset_snapshot(backend, rt, dataset)
    assert not differences(kept, fresh), "\n".join(differences(kept, fresh))


def git(repo: Path, *args: str) -> str:
    """Run git in a test repository (a fixed author and clock, no user config)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent),
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def write(folder: Path, files: dict[str, str]) -> None:
    """Write files (relative path -> text) under a folder, making sub-folders."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
