"""A broker or state store that does not answer: a command says so within 5 s, naming the
server by its URL without the password and the setting that names it, and leaves no job
behind that would wait for it (a job whose batches cannot be queued is failed at once)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app as cli_app
from core.ports import StoreError
from core.settings import Settings
from runtime import Runtime
from tests.services import redis_url
from workers.celery_app import configure
from workers.jobs import JobTracker
from workers.orchestration import cognify

pytestmark = pytest.mark.integration

PASSWORD = "hunter2secret"
DEADLINE_S = 5.0


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def down() -> str:
    return f"redis://:{PASSWORD}@127.0.0.1:{closed_port()}/0"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "note.txt").write_text("Ada Lovelace met Charles Babbage.", encoding="utf-8")
    yield tmp_path
    # The CLI pointed the process's Celery app at the dead broker: back to the in-memory one.
    configure(Settings(_env_file=None, broker_url="memory://", result_backend="cache+memory://"))  # type: ignore[call-arg]


def timed_cli(env: dict[str, str], *args: str) -> tuple[float, int, str]:
    started = time.monotonic()
    result = CliRunner().invoke(cli_app, list(args), env=env)
    return time.monotonic() - started, result.exit_code, result.stderr


def assert_named(stderr: str, url: str, setting: str) -> None:
    shown = url.replace(PASSWORD, "***")
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert shown in stderr and setting in stderr and PASSWORD not in stderr, stderr


def test_state_store_down(home: Path, down: str) -> None:
    env = {"COGMILL_HOME": str(home / "home"), "COGMILL_REDIS_URL": down}
    for args in (["jobs", "list"], ["add", str(home / "note.txt"), "-d", "notes"]):
        took, code, stderr = timed_cli(env, *args)
        assert code == 1 and took < DEADLINE_S, (took, code, stderr)
        assert_named(stderr, down, "COGMILL_REDIS_URL")


@pytest.mark.services
def test_broker_down_leaves_no_job(home: Path, down: str) -> None:
    state = redis_url()
    prefix = f"test-down-{uuid.uuid4().hex[:8]}:"
    env = {
        "COGMILL_HOME": str(home / "home"),
        "COGMILL_REDIS_URL": state,
        "COGMILL_REDIS_PREFIX": prefix,
    }
    took, code, stderr = timed_cli(env, "add", str(home / "note.txt"), "-d", "notes")
    assert code == 0, stderr
    queueing = env | {"COGMILL_BROKER_URL": down, "COGMILL_RESULT_BACKEND": down}
    took, code, stderr = timed_cli(queueing, "cognify", "notes")
    assert code == 1 and took < DEADLINE_S, (took, code, stderr)
    assert_named(stderr, down, "COGMILL_BROKER_URL")
    assert "COGMILL_RESULT_BACKEND" in stderr
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        home=home / "home",
        redis_url=state,
        redis_prefix=prefix,
        broker_url=down,
        result_backend=down,
    )
    rt = Runtime(settings)
    try:
        assert JobTracker(rt.state).ids() == set()  # nothing was planned

        # The broker going away between the check and the publish: the job planned is failed
        # at once, not left running for the sweeper to resume minutes later.
        configure(settings)
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"cannot publish .* broker at redis://:\*\*\*@"):
            cognify(rt, "notes")
        assert time.monotonic() - started < DEADLINE_S
        [job] = JobTracker(rt.state).all(live=False)
        assert job.status.value == "failed" and "broker" in job.message, job
        assert PASSWORD not in job.message and JobTracker(rt.state).running() == []
    finally:
        for key in rt.state.keys(""):
            rt.state.delete(key)
        rt.close()
