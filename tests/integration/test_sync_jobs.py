"""Sync jobs: a tenant's sync is held to its storage quota (COGMILL_TENANT_STORAGE_BYTES), as its
uploads are (a sync that would store more fails with the reason and stores nothing), and a sync
cancelled before its source phase ran ends cancelled, having read nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.services.sync import follow, sync
from core.access import Caller, Role
from core.models.jobs import JobStatus
from core.settings import Settings
from pipelines.sources.spec import parse_source
from tests.backends import finished, threaded_runtime
from tests.sync_support import write
from workers.jobs import JobTracker
from workers.sync import queue_sync, run_sync, sync_report


@pytest.mark.slow
def test_a_tenant_s_sync_past_its_quota_fails_and_stores_nothing(
    tmp_path: Path, embedder: object
) -> None:
    folder = tmp_path / "source"
    write(folder, {"a.txt": "Ada Lovelace visited London.", "b.txt": "Alan Turing ran far."})
    acme = Caller("acme", Role.WRITER)
    spec = parse_source(str(folder))
    quota = {"home": tmp_path / "home", "tenant_storage_bytes": 40, "_env_file": None}
    with threaded_runtime(Settings(**quota), {"embedder": embedder}) as rt:  # type: ignore[arg-type]
        job = finished(rt, sync(rt, "docs", spec, acme))
        assert job.status is JobStatus.FAILED, job
        assert "COGMILL_TENANT_STORAGE_BYTES" in job.message and "48" in job.message
        assert not list(rt.catalog.documents("acme:docs"))
        rt.settings.tenant_storage_bytes = 48
        assert finished(rt, sync(rt, "docs", spec, acme)).status is JobStatus.SUCCEEDED
        write(folder, {"c.txt": "more"})
        assert finished(rt, sync(rt, "docs", spec, acme)).status is JobStatus.FAILED


def test_a_sync_cancelled_before_its_source_phase_reads_nothing(
    tmp_path: Path, embedder: object
) -> None:
    folder = tmp_path / "source"
    write(folder, {"a.txt": "Ada Lovelace visited London."})
    settings = Settings(home=tmp_path / "home", _env_file=None)  # type: ignore[call-arg]
    with threaded_runtime(settings, {"embedder": embedder}) as rt:
        stored, source = follow(rt, "docs", parse_source(str(folder)))
        job = queue_sync(rt, stored, source, publish=False)
        JobTracker(rt.state).cancel(job.id)
        run_sync(rt, job.id, 0)
        assert JobTracker(rt.state).get(job.id).status is JobStatus.CANCELLED
        assert not list(rt.catalog.documents("docs"))
        assert sync_report(rt.state, job.id) is None
