"""The graph explorer (/ui) in a real headless Chromium (Debian's `chromium`, driven by
Playwright through `executable_path`), against a real `cogmill serve` with API keys required.

The server holds the bundled sample corpus, cognified with the test LLM server. The page is
given a key, then: a search shows results with their sources; clicking an entity of a result
draws its neighbourhood as SVG nodes (the entity among them); clicking a neighbour adds its
own; the documents view lists statuses; a job started by the test shows its progress moving
in the jobs view (read from the event stream). No console error and no page error may occur
on the way. A screenshot of each view goes to .artifacts/ui/ (COGMILL_UI_ARTIFACTS), for CI.

Skipped only when no chromium binary is found and COGMILL_REQUIRE_SERVICES is unset
(deploy/install-system.sh installs it; CI sets COGMILL_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

from api.services.demo import SAMPLE_CORPUS
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.slow  # a `cogmill serve` process and Chromium

ROOT = Path(__file__).parents[2]
ARTIFACTS = Path(os.environ.get("COGMILL_UI_ARTIFACTS", ROOT / ".artifacts" / "ui"))
DATASET = "samples"
SLOW = "slow"
BROKEN = "broken.json"
SLOW_DOCS = 8
QUERY = "Where was Marie Curie born?"
TIMEOUT_MS = 30_000


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("COGMILL_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; COGMILL_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


def chromium() -> str:
    """The system Chromium's path; skips (fails under COGMILL_REQUIRE_SERVICES=1) without one."""
    for name in (os.environ.get("COGMILL_CHROMIUM", ""), "chromium", "chromium-browser"):
        found = shutil.which(name) if name else None
        if found:
            return found
    unavailable("no chromium binary (deploy/install-system.sh installs Debian's `chromium`)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str
    key: str
    llm: LLMTestServer
    reader: str = ""

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def tenant_keys(home: Path) -> tuple[str, str]:
    """A writer's and a reader's key of a new tenant, made in the home before the server
    opens it."""
    rt = Runtime(Settings(home=home))
    try:
        tenants = Tenants(rt.state)
        tenants.create_tenant("acme")
        return tenants.create_key("acme", Role.WRITER)[0], tenants.create_key("acme")[0]
    finally:
        rt.close()


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "cogmill serve exited; see its output above"
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"cogmill serve at {url} was not ready in {timeout} s")


def cognified(client: httpx.Client, dataset: str, timeout: float = 120) -> dict[str, Any]:
    started = client.post(f"/api/v1/datasets/{dataset}/cognify", json={})
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    deadline = time.monotonic() + timeout
    while (job := client.get(f"/api/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    return job


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("ui-home")
    with LLMTestServer() as llm:
        env = {
            **os.environ,
            "COGMILL_HOME": str(home),
            "COGMILL_AUTH": "required",
            "COGMILL_LLM_BASE_URL": llm.base_url,
            "COGMILL_LLM_MODEL": "test",
            "COGMILL_EMBEDDING_BASE_URL": llm.base_url,
            "COGMILL_EMBEDDING_DIM": "64",
            # One document per batch: a job's progress moves batch by batch.
            "COGMILL_BATCH_SIZE": "1",
        }
        key, reader = tenant_keys(home)
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--port", str(port)], env=env, cwd=ROOT
        )
        try:
            url = f"http://127.0.0.1:{port}"
            began = time.monotonic()
            wait_ready(url, process)
            print(f"cogmill serve ready in {time.monotonic() - began:.1f} s")
            running = Server(url, key, llm, reader)
            with running.client() as client:
                files = [
                    ("files", (p.name, p.read_bytes())) for p in sorted(SAMPLE_CORPUS.iterdir())
                ]
                files.append(("files", (BROKEN, b'{"records": [1, 2')))  # cut short: it fails
                added = client.post(f"/api/v1/datasets/{DATASET}/data", files=files)
                assert added.status_code == 200, added.text
                began = time.monotonic()
                assert cognified(client, DATASET)["status"] == "succeeded"
                print(f"sample corpus cognified in {time.monotonic() - began:.1f} s")
            yield running
        finally:
            process.terminate()
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Page:
    """A page and every console error and uncaught exception it reported."""

    page: Any
    errors: list[str]

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    opened.on(
        "console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None
    )
    opened.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    opened.goto(f"{server.url}/ui")
    yield Page(opened, errors)
    context.close()


def wait_until(page: Any, expression: str, timeout: float = TIMEOUT_MS / 1000) -> None:
    """Poll a JS expression until it is truthy. Not `wait_for_function`: that evaluates strings
    inside the page, which its CSP (no 'unsafe-eval') rightly refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"not true after {timeout} s: {expression}"
        time.sleep(0.05)


def settled(page: Any) -> None:
    """Wait for the force layout to come to rest (before a screenshot)."""
    wait_until(page, "document.querySelector('#graph').dataset.layout === 'settled'")


def node_count(page: Any) -> int:
    return int(page.locator("#nodes g.node").count())


def test_explore_documents_and_job_progress(page: Page, server: Server) -> None:
    p = page.page
    assert p.url.endswith("/ui/")
    # The key goes in the field and out as a header only: not kept in the page's URL.
    p.fill("#api-key", server.key)
    p.click("#connect")
    p.wait_for_selector(f"#dataset option[value='{DATASET}']", state="attached")
    assert server.key not in p.url
    assert p.evaluate("sessionStorage.getItem('cogmill.apiKey')") == server.key

    # Search: results with their sources (document names and chunks).
    p.select_option("#dataset", DATASET)
    p.fill("#query", QUERY)
    p.select_option("#search-type", "GRAPH_COMPLETION")
    p.click("#search-form button[type=submit]")
    p.wait_for_selector("#results li.result")
    documents = p.locator("#results .sources .doc").all_inner_texts()
    assert "marie_curie.txt" in documents, documents
    assert p.locator("#results .sources button.chunk").count() >= 1
    page.shot("search")

    # Clicking the entity in a result's evidence draws its neighbourhood.
    p.locator("#results button.entity", has_text="Marie Curie").first.click()
    marie = p.locator("#nodes g.node[data-name='Marie Curie']")
    marie.wait_for()
    wait_until(p, "document.querySelectorAll('#nodes g.node').length > 2")
    first = node_count(p)
    assert p.locator("#nodes g.node circle").count() == first
    assert "selected" in (marie.get_attribute("class") or "")
    settled(p)
    page.shot("graph")

    # Expanding a neighbour (a chunk that mentions her) adds the nodes around it.
    chunk = p.locator("#nodes g.node.type-DocumentChunk:not(.expanded)").first
    chunk.locator("circle").click()  # the node itself, not its label (which takes no clicks)
    wait_until(p, f"document.querySelectorAll('#nodes g.node').length > {first}")
    assert node_count(p) > first
    p.wait_for_selector("#nodes g.node.type-Document")  # the chunk's document came in
    settled(p)
    page.shot("graph-expanded")

    # Documents with their statuses.
    p.click("#tabs button[data-view=documents]")
    p.wait_for_selector("#documents tbody tr")
    rows = p.locator("#documents tbody tr")
    statuses = dict(
        rows.evaluate_all("rows => rows.map(r => [r.cells[0].innerText, r.dataset.status])")
    )
    assert len(statuses) == len(list(SAMPLE_CORPUS.iterdir())) + 1
    assert {name: s for name, s in statuses.items() if s != "processed"} == {BROKEN: "failed"}
    assert rows.filter(has_text=BROKEN).locator("td.error").inner_text().strip()
    page.shot("documents")

    # A job started outside the page: the jobs view follows it and its progress moves.
    with server.client() as client:
        texts = [
            {
                "name": f"slow{i}.txt",
                "text": f"Person{i} Smith lives in Town{i}. Town{i} lies in Land{i}.",
            }
            for i in range(SLOW_DOCS)
        ]
        assert (
            client.post(f"/api/v1/datasets/{SLOW}/data", json={"documents": texts}).status_code
            == 200
        )
        # The last step of each batch embeds: slow embeddings spread the batches' ends.
        server.llm.configure(latency_ms=0, embedding_latency_ms=700)
        try:
            started = client.post(f"/api/v1/datasets/{SLOW}/cognify", json={})
            assert started.status_code == 202, started.text
            job_id = started.json()["job_id"]
            p.evaluate(
                """() => {
                    window.seenProgress = [];
                    const box = document.querySelector('#job-progress');
                    new MutationObserver(() => window.seenProgress.push(
                        [box.dataset.done, box.dataset.total, box.dataset.status]
                    )).observe(box, {attributes: true});
                }"""
            )
            p.click("#tabs button[data-view=jobs]")
            p.wait_for_selector(f"#jobs tbody tr[data-job='{job_id}']", state="attached")
            wait_until(p, "document.querySelector('#job-progress').dataset.status === 'running'")
            page.shot("jobs-running")
            finished = "['succeeded', 'failed', 'cancelled']"
            wait_until(
                p,
                f"{finished}.includes(document.querySelector('#job-progress').dataset.status)",
                60,
            )
        finally:
            server.llm.configure(embedding_latency_ms=None)
    seen = p.evaluate("window.seenProgress")
    done = [int(d) for d, total, _ in seen if d is not None]
    assert seen[-1][2] == "succeeded" and int(seen[-1][0]) == SLOW_DOCS == int(seen[-1][1]), seen
    # Moving: the bar started short of the end and showed a value strictly between none and
    # all before the end (how many depends on how the batches' ends fall into the stream's
    # polls), never going back.
    print(f"batches done as the page showed them: {done}")
    assert done[0] < SLOW_DOCS and any(0 < d < SLOW_DOCS for d in done), seen
    assert done == sorted(done), seen
    page.shot("jobs")
    assert p.text_content("#job-id") == job_id[:8]

    assert page.errors == [], page.errors


def triplet_keys(page: Any) -> list[tuple[str, ...]]:
    """Each triplet line of the results as (relation, end, end), its ends in either order."""
    lines = page.locator("#results .evidence li.triplet").all_inner_texts()
    keys = []
    for line in lines:
        head, _, rest = line.partition(" —")
        relation, _, tail = rest.partition("→ ")
        keys.append((relation, *sorted((head.strip(), tail.strip()))))
    return keys


def overlapping_labels(page: Any) -> list[tuple[str, str]]:
    """Pairs of shown graph labels (of nodes and edges) whose boxes on screen overlap."""
    return page.evaluate(
        """() => {
            const shown = [...document.querySelectorAll('#graph text')].filter(
                (t) => getComputedStyle(t).visibility !== 'hidden' && t.textContent);
            const boxes = shown.map((t) => [t.textContent, t.getBoundingClientRect()]);
            const pairs = [];
            for (let i = 0; i < boxes.length; i += 1) {
                for (let j = i + 1; j < boxes.length; j += 1) {
                    const [a, p] = boxes[i], [b, q] = boxes[j];
                    const cut = 0.5;  // a shared edge is no overlap
                    if (p.left + cut < q.right && q.left + cut < p.right
                        && p.top + cut < q.bottom && q.top + cut < p.bottom) pairs.push([a, b]);
                }
            }
            return pairs;
        }"""
    )


def test_routed_search_says_each_thing_once(page: Page, server: Server) -> None:
    """The router's note once, each triplet once (not again reversed), labels that do not
    overlap in a small graph panel, and a status line that belongs to the view shown."""
    p = page.page
    p.set_viewport_size({"width": 960, "height": 600})
    p.fill("#api-key", server.key)
    p.click("#connect")
    p.wait_for_selector(f"#dataset option[value='{DATASET}']", state="attached")
    p.select_option("#dataset", DATASET)
    p.fill("#query", QUERY)
    p.select_option("#search-type", "")  # Auto: the router chooses
    p.click("#search-form button[type=submit]")
    p.wait_for_selector("#results li.result")
    route = p.text_content("#route") or ""
    assert route.startswith("Router chose ") and "routed to" not in route, route
    reason = route.split(": ", 1)[1].split(" — ")[0]
    assert route.count(reason) == 1, route
    keys = triplet_keys(p)
    assert keys and len(keys) == len(set(keys)), keys
    status = p.text_content("#status") or ""
    assert "results" in status, status
    page.shot("search-routed")

    p.locator("#results button.entity", has_text="Marie Curie").first.click()
    wait_until(p, "document.querySelectorAll('#nodes g.node').length > 2")
    first = node_count(p)
    chunk = p.locator("#nodes g.node.type-DocumentChunk:not(.expanded)").first
    chunk.locator("circle").click()  # more nodes, more labels to place
    wait_until(p, f"document.querySelectorAll('#nodes g.node').length > {first}")
    settled(p)
    assert overlapping_labels(p) == []
    assert p.locator("#graph text:not(.crowded)").count() >= 3  # not all hidden either
    drawn = p.evaluate("[...document.querySelectorAll('#edges g')].map((g) => g.dataset.key)")
    assert len(drawn) == len(set(drawn))
    page.shot("graph-small")

    p.click("#tabs button[data-view=jobs]")
    p.wait_for_selector("#jobs tbody tr", state="attached")
    status = p.text_content("#status") or ""
    assert "results" not in status and "jobs" in status, status
    p.click("#tabs button[data-view=explore]")
    assert "results" in (p.text_content("#status") or "")
    assert page.errors == [], page.errors


def test_a_reader_key_is_not_offered_to_cognify(page: Page, server: Server) -> None:
    p = page.page
    p.fill("#api-key", server.reader)
    p.click("#connect")
    p.wait_for_selector(f"#dataset option[value='{DATASET}']", state="attached")
    p.click("#tabs button[data-view=jobs]")
    p.wait_for_selector("#jobs tbody tr", state="attached")
    assert p.locator("#cognify").is_hidden()
    assert p.evaluate("document.body.dataset.role") == "reader"
    page.shot("jobs-reader")
    assert page.errors == [], page.errors
