"""A `cogmill sync` killed half way (SIGKILL once some of its documents are cognified) and run
again ends with the dataset equal, node for node and vector for vector, to one clean sync
(embedded: the killed process took its queue along, and the next sync ends its job as
interrupted once it made no progress for COGMILL_SWEEP_STALL_SECONDS)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from core.settings import Settings
from pipelines.sources.spec import parse_source
from tests.backends import EMBEDDED, Backend, embedder_fixture, threaded_runtime  # noqa: F401
from tests.dataset_snapshot import dataset_snapshot
from tests.llm_server import LLMTestServer
from tests.sync_support import report, same_as_fresh, write
from workers.jobs import JobTracker

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FILES = 40


def processed(home: Path, dataset: str) -> int:
    """Documents of the dataset marked processed, read from the graph file as it is written."""
    path = home / "graph.sqlite"
    if not path.exists():
        return 0
    query = "SELECT properties FROM nodes WHERE dataset = ? AND type = 'Document'"
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)) as db:
            rows = db.execute(query, (dataset,)).fetchall()
    except sqlite3.OperationalError:  # its tables are not made yet
        return 0
    return sum(json.loads(raw).get("status") == "processed" for (raw,) in rows)


def cli(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "api.cli", *args],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_a_sync_killed_half_way_and_run_again_ends_as_one_clean_sync(
    tmp_path: Path, embedder: object
) -> None:
    folder, home = tmp_path / "source", tmp_path / "home"
    names = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "Mary Somerville"]
    texts = {
        f"n{i:02d}.txt": f"{names[i % 5]} met Keeper {i} in Town {i % 7}." for i in range(FILES)
    }
    write(folder, texts)
    with LLMTestServer(latency_ms=150) as llm:
        env = {
            "COGMILL_HOME": str(home),
            "COGMILL_LLM_BASE_URL": llm.base_url,
            "COGMILL_LLM_MODEL": "test",
            "COGMILL_BATCH_SIZE": "2",
            "COGMILL_SWEEP_STALL_SECONDS": "2",
        }
        killed = cli(env, "sync", str(folder), "--dataset", "notes")
        deadline = time.monotonic() + 240
        while not 0 < processed(home, "notes") < FILES:
            assert killed.poll() is None, killed.communicate()[0]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(30)
        at_kill = processed(home, "notes")
        assert 0 < at_kill < FILES
        time.sleep(2.5)  # the killed job makes no more progress: it is taken as stopped
        again = cli(env, "sync", str(folder), "--dataset", "notes")
        out, _ = again.communicate(timeout=300)
        assert again.returncode == 0, out
        assert processed(home, "notes") == FILES

        values = {"home": home, "llm_base_url": llm.base_url, "llm_model": "test"}
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]
        with threaded_runtime(settings, {"embedder": embedder}) as rt:
            jobs = sorted(JobTracker(rt.state).all(), key=lambda j: j.created_at)
            assert [j.status.value for j in jobs] == ["failed", "succeeded"], jobs
            assert "interrupted" in jobs[0].message
            # The second sync found every file stored and cognified what the first left.
            assert report(rt, jobs[1])["counts"]["unchanged"] == FILES
            assert jobs[1].total_documents == FILES - at_kill
            backend = Backend(EMBEDDED, tmp_path)
            assert dataset_snapshot(backend, rt, "notes")
            same_as_fresh(backend, rt, "notes", parse_source(str(folder)))
