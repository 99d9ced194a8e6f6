"""Schedules from the command line, and fired by an embedded `cogmill serve` from a thread of its
own (the app's lifespan with `schedules`): a run's job appears without any beat process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli
from api.http.app import create_app
from core.settings import Settings
from runtime import Runtime
from tests.sync_support import write
from workers.jobs import JobTracker


def test_schedules_from_the_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "source"
    write(folder, {"a.txt": "Ada Lovelace visited London."})
    env = {"COGMILL_HOME": str(tmp_path / "home")}
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, list(args), env=env)
        assert result.exit_code == code, result.output
        return result.output

    added = run("schedules", "add", "docs", "--sync", str(folder), "--every", "15m")
    schedule = added.split()[1].rstrip(":")
    assert schedule.startswith("sch_") and "every 900s" in added
    listed = run("schedules", "list")
    assert schedule in listed and "0 fired" in listed
    assert "no beat fired" in listed  # nothing fires them yet (stderr is mixed in)
    assert "paused" in run("schedules", "pause", schedule)
    assert "next" in run("schedules", "resume", schedule)
    assert "COGMILL_SCHEDULE_MIN_SECONDS" in run(
        "schedules", "add", "docs", "--sync", str(folder), "--every", "5s", code=2
    )
    assert "--sync SOURCE or --cognify" in run("schedules", "add", "docs", "--every", "1h", code=2)
    run("schedules", "remove", schedule)
    assert "no schedule" in run("schedules", "remove", schedule, code=2)
    run("schedules", "add", "docs", "--sync", str(folder), "--every", "1h")
    run("delete", "--dataset", "docs", "--yes")  # its schedules go with it
    assert "sch_" not in run("schedules", "list")
    assert "memory://" in run("beat", code=2)  # embedded: `serve` fires them


@pytest.mark.slow  # waits for a run of a two-second schedule
def test_an_embedded_serve_fires_schedules_itself(tmp_path: Path) -> None:
    folder = tmp_path / "source"
    write(folder, {"a.txt": "Ada Lovelace visited London."})
    values = {"home": tmp_path / "home", "schedule_min_seconds": 1, "sync_roots": [tmp_path]}
    settings = Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]
    rt = Runtime(settings)
    with TestClient(create_app(rt, schedules=True)) as client:
        body = {"dataset": "docs", "sync": {"source": str(folder)}, "every": "2s"}
        made = client.post("/api/v1/schedules", json=body)
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 90
        while not (jobs := [j for j in JobTracker(rt.state).all() if j.status.finished]):
            assert time.monotonic() < deadline, client.get("/api/v1/schedules").json()
            time.sleep(0.2)
        assert jobs[0].options["schedule"] == made.json()["id"]
        assert jobs[0].status.value == "succeeded", jobs[0]
