"""A tenant's sync is held to its storage quota (COGMILL_TENANT_STORAGE_BYTES), as its uploads
are: a sync that would store more fails with the reason and stores nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.services.sync import sync
from core.access import Caller, Role
from core.models.jobs import JobStatus
from core.settings import Settings
from pipelines.sources.spec import parse_source
from tests.backends import embedder_fixture, finished, threaded_runtime  # noqa: F401 - fixture
from tests.sync_support import write

pytestmark = pytest.mark.integration


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
