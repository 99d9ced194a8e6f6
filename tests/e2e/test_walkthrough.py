"""docs/operations.md's distributed walkthrough without Docker, run as written: its command
block in bash, from a directory shaped like the repository's root, with free ports on the
block's first line (the line a reader edits to choose them). Redis and Neo4j come up behind
the block's password (Neo4j's HTTP API too), two workers with their own node names, the API
and Flower on loopback behind a login; the sample corpus is cognified and the two-hop question
answered. Then Flower is looked at through its API and in a browser (Debian's chromium through
Playwright): its task list names each step and both workers, its workers page shows both.
Screenshots go to .artifacts/flower/ (COGMILL_FLOWER_ARTIFACTS).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import neo4j
import pytest
import redis

from tests.docs_blocks import block
from tests.e2e.faults.servers import free_port
from tests.e2e.test_ui_browser import chromium

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("COGMILL_FLOWER_ARTIFACTS", ROOT / ".artifacts" / "flower"))
PORTS_LINE = "REDIS_PORT=6390 NEO4J_PORT=7697 API_PORT=8000 FLOWER_PORT=5555"
PASSWORD = "change-me-services"  # the block's
FLOWER_LOGIN = ("admin", "change-me-flower")
HTTP_OFFSET = 213  # services.sh: Neo4j's HTTP port is the Bolt port minus this
DEADLINE_S = 1800  # Neo4j's first start, four Python processes and a cognify on 2 busy cores


@dataclass
class Walk:
    ports: dict[str, int]
    work: Path
    stdout: str
    stderr: str
    seconds: float

    @property
    def flower(self) -> str:
        return f"http://127.0.0.1:{self.ports['FLOWER_PORT']}"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.ports['API_PORT']}"


def free_ports() -> dict[str, int]:
    """Free ports for the block's first line (and Neo4j's HTTP port beside its Bolt one)."""
    while True:
        bolt = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", bolt - HTTP_OFFSET))
            except OSError:
                continue
        return {
            "REDIS_PORT": free_port(),
            "NEO4J_PORT": bolt,
            "API_PORT": free_port(),
            "FLOWER_PORT": free_port(),
        }


def stop_group(leader: int) -> None:
    """Stop the processes the block left running (its process group), by signal."""
    for sig, wait in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(leader, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(leader, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def wait_for(url: str, auth: tuple[str, str] | None = None, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, auth=auth, timeout=10).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer in {timeout} s"
        time.sleep(1)


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    first, rest = block("operations.md", "walkthrough").split("\n", 1)
    assert first.startswith(PORTS_LINE), first
    ports = free_ports()
    script = " ".join(f"{k}={v}" for k, v in ports.items()) + "\n" + rest
    work = tmp_path_factory.mktemp("walkthrough")
    for name in (".venv", "deploy", "api"):  # what the block reads from the repository's root
        (work / name).symlink_to(ROOT / name)
    # The block's own settings only; the tests' Neo4j JVM flags (Makefile) apply to its Neo4j.
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGMILL_")}
    if opts := os.environ.get("COGMILL_NEO4J_JAVA_OPTS"):
        env["COGMILL_NEO4J_JAVA_OPTS"] = opts
    services = {"COGMILL_SERVICES_DIR": str(work / ".services")}
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", "set -e\n" + script],
        cwd=work,
        env=env | services,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=DEADLINE_S)
        seconds = time.monotonic() - started
        print(f"walkthrough block ran in {seconds:.0f} s")
        assert proc.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
        done = Walk(ports, work, stdout, stderr, seconds)
        wait_for(f"{done.flower}/api/workers", FLOWER_LOGIN)
        yield done
    finally:
        stop_group(proc.pid)
        stop = [
            str(ROOT / "deploy" / "services.sh"),
            "stop",
            "--redis-port",
            str(ports["REDIS_PORT"]),
            "--neo4j-port",
            str(ports["NEO4J_PORT"]),
        ]
        subprocess.run(stop, env=env | services, cwd=work, timeout=300, check=False)


def test_the_block_cognifies_and_answers(walk: Walk) -> None:
    assert re.search(r"^job [0-9a-f]{32}: succeeded$", walk.stdout, re.MULTILINE), walk.stdout
    answer = walk.stdout[walk.stdout.index("documents 8,") :]
    assert "alan_turing.txt" in answer and "london.md" in answer, answer
    bolt, http = walk.ports["NEO4J_PORT"], walk.ports["NEO4J_PORT"] - HTTP_OFFSET
    assert f"neo4j up on port {bolt}, HTTP on port {http}" in walk.stderr, walk.stderr
    found = httpx.post(
        f"{walk.api}/api/v1/search",
        json={"query": "Which river flows through London?", "datasets": ["demo"]},
        timeout=120,
    )
    assert found.status_code == 200, found.text
    assert "london.md" in {
        s["document_name"] for r in found.json()["results"] for s in r["sources"]
    }


def test_the_services_take_the_password(walk: Walk) -> None:
    url = f"redis://127.0.0.1:{walk.ports['REDIS_PORT']}/0"
    with pytest.raises(redis.AuthenticationError), redis.Redis.from_url(url) as anonymous:
        anonymous.ping()
    with redis.Redis.from_url(url.replace("//", f"//:{PASSWORD}@")) as client:
        assert client.ping()
    bolt = f"bolt://127.0.0.1:{walk.ports['NEO4J_PORT']}"
    wrong = neo4j.GraphDatabase.driver(bolt, auth=("neo4j", "wrong"))
    with wrong, pytest.raises(neo4j.exceptions.AuthError):
        wrong.verify_connectivity()
    http = f"http://127.0.0.1:{walk.ports['NEO4J_PORT'] - HTTP_OFFSET}"
    assert httpx.get(http, timeout=30).json()["neo4j_edition"] == "community"
    query = {"statements": [{"statement": "MATCH (n:Entity) RETURN count(n) AS n"}]}
    tx = f"{http}/db/neo4j/tx/commit"
    assert httpx.post(tx, json=query, timeout=30).status_code == 401
    counted = httpx.post(tx, json=query, auth=("neo4j", PASSWORD), timeout=30).json()
    assert counted["errors"] == [] and counted["results"][0]["data"][0]["row"][0] > 0, counted


def flower_workers(walk: Walk) -> dict[str, Any]:
    answer = httpx.get(f"{walk.flower}/api/workers?refresh=1", auth=FLOWER_LOGIN, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_flower_shows_a_worker_per_process_behind_a_login(walk: Walk) -> None:
    assert httpx.get(f"{walk.flower}/api/workers", timeout=30).status_code == 401
    names = sorted(flower_workers(walk))
    assert len(names) == 2, names
    assert [n.split("-")[0] for n in names] == ["ingest", "llm"], names
    assert all(re.fullmatch(r"(ingest|llm)-\d+@.+", n) for n in names), names
    tasks = httpx.get(f"{walk.flower}/api/tasks", auth=FLOWER_LOGIN, timeout=60).json()
    by_worker: dict[str, set[str]] = {}
    for task in tasks.values():
        by_worker.setdefault(task["worker"], set()).add(task["name"])
    assert set(by_worker) == set(names), by_worker
    assert {"cogmill.classify", "cogmill.extract_graph"} <= set().union(*by_worker.values())
    for log in ("worker-ingest.log", "worker-llm.log"):
        assert "DuplicateNodenameWarning" not in (walk.work / log).read_text(), log


def test_flower_listens_on_loopback_only(walk: Walk) -> None:
    outside = [
        a for a in socket.gethostbyname_ex(socket.gethostname())[2] if not a.startswith("127.")
    ]
    for address in outside:
        with (
            pytest.raises(OSError),
            socket.create_connection((address, walk.ports["FLOWER_PORT"]), timeout=5),
        ):
            pass


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def test_flower_pages_show_the_steps_and_both_workers(walk: Walk, browser: Any) -> None:
    names = sorted(flower_workers(walk))
    login = {"username": FLOWER_LOGIN[0], "password": FLOWER_LOGIN[1]}
    context = browser.new_context(viewport={"width": 1440, "height": 900}, http_credentials=login)
    page = context.new_page()
    page.set_default_timeout(60_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        page.goto(f"{walk.flower}/tasks")
        page.wait_for_selector("table tbody tr td", state="attached")
        page.wait_for_function("document.body.innerText.includes('cogmill.extract_graph')")
        page.screenshot(path=str(ARTIFACTS / "tasks.png"), full_page=True)
        text = "".join(page.inner_text("body").split())  # a narrow column wraps a name
        for step in ("cogmill.classify", "cogmill.extract_graph", "cogmill.finish_batch"):
            assert step in text, step
        assert all(name in text for name in names), (names, text[:3000])

        page.goto(f"{walk.flower}/workers")
        page.wait_for_selector("table tbody tr td", state="attached")
        page.screenshot(path=str(ARTIFACTS / "workers.png"), full_page=True)
        text = "".join(page.inner_text("body").split())
        assert all(name in text for name in names), (names, text[:3000])
    finally:
        context.close()
