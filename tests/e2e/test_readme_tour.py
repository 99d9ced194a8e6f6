"""The README's tour, run as a new user pastes it into a fresh clone.

The blocks marked `<!-- tour -->` and `<!-- tour-serve -->` in README.md are read from the file
itself. Each `cogmill` line of the tour runs in bash, after the block's set-up lines (`source`,
`export`, `cd`), in a fresh working directory (holding only links to the repository's `.venv`
and `api/`) with a fresh COGMILL_HOME and no other COGMILL_* variable: each must exit 0, and the
searches must find the documents that answer them. Then the serve block runs as one bash script
on the same data; its port is the only thing changed, to a free one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- (tour|tour-serve) -->\s*```bash\n(.*?)```", re.S)
SETUP = ("source ", "export ", "cd ")
LINE_TIMEOUT_S = 600
SERVE_TIMEOUT_S = 300
TURING = "Which river flows through the city where Alan Turing was born?"


def blocks() -> dict[str, str]:
    found = {name: body for name, body in BLOCK.findall(ROOT.joinpath("README.md").read_text())}
    assert set(found) == {"tour", "tour-serve"}, f"README.md's tour blocks: {sorted(found)}"
    return found


def shell_lines(block: str) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment-only lines left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and line[0] != "#"]


@dataclass(frozen=True)
class Ran:
    line: str
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Tour:
    cwd: Path
    env: dict[str, str]
    setup: list[str]
    ran: dict[str, Ran]

    def output(self, start: str) -> Ran:
        """The one run line that starts with `start`."""
        hits = [ran for line, ran in self.ran.items() if line.startswith(start)]
        assert len(hits) == 1, f"{len(hits)} tour lines start with {start!r}: {list(self.ran)}"
        return hits[0]


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COGMILL_", "VIRTUAL_ENV"))}
    env["COGMILL_HOME"] = str(home)
    return env


def run(script: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """Run `script` in bash in its own process group, killed whole on a timeout."""
    pipe = subprocess.PIPE
    with subprocess.Popen(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        text=True,
        start_new_session=True,
        stdout=pipe,
        stderr=pipe,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"timed out after {timeout} s:\n{script}\n{out}\n{err}") from None
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Tour:
    cwd = tmp_path_factory.mktemp("clone")
    for name in (".venv", "api"):
        (cwd / name).symlink_to(ROOT / name, target_is_directory=True)
    env = clean_env(tmp_path_factory.mktemp("cogmill-home"))
    setup: list[str] = []
    ran: dict[str, Ran] = {}
    for line in shell_lines(blocks()["tour"]):
        if line.startswith(SETUP):
            setup.append(line)
            continue
        assert line.startswith("cogmill "), f"the tour should hold cogmill commands: {line!r}"
        code, out, err = run("\n".join([*setup, line]), cwd, env, LINE_TIMEOUT_S)
        ran[line] = Ran(line, code, out, err)
        assert code == 0, f"{line}\nexit {code}\n{out}\n{err}"
    return Tour(cwd, env, setup, ran)


def test_every_tour_line_exits_0_and_cognify_processes_the_whole_corpus(tour: Tour) -> None:
    assert tour.setup == ["source .venv/bin/activate"]
    assert len(tour.ran) >= 6
    cognified = tour.output("cogmill cognify ").out
    assert "documents 8," in cognified and "errors 0," in cognified, cognified


def test_the_two_hop_search_finds_both_documents(tour: Tour) -> None:
    out = tour.output(f'cogmill search "{TURING}"').out
    tops = re.findall(r"^\d+\. \([\d.]+\) (\S+)$", out, re.M)
    assert tops[:2] == ["alan_turing.txt", "london.md"], out
    assert "The River Thames flows through London" in out


def test_the_json_search_answers_from_the_csv_row(tour: Tour) -> None:
    body = json.loads(tour.output('cogmill search "Who founded Siemens?"').out)
    assert body["query"] == "Who founded Siemens?" and len(body["results"]) == 3
    first = body["results"][0]
    assert "Werner von Siemens" in first["text"], first
    assert {s["document_name"] for s in first["sources"]} == {"companies.csv"}
    assert all(set(r) >= {"text", "score", "sources"} for r in body["results"])


def test_route_names_a_search_type(tour: Tour) -> None:
    out = tour.output("cogmill route ").out
    assert re.match(r"[A-Z_]+ \(confidence [\d.]+\)", out), out


def test_jobs_list_shows_the_succeeded_job(tour: Tour) -> None:
    assert re.search(r"\bsucceeded\b.*\bsample\b.*\b8/8 docs\b", tour.output("cogmill jobs ").out)


def test_the_export_is_graphml_of_the_graph(tour: Tour) -> None:
    line = tour.output("cogmill export ").line
    target = tour.cwd / line.split("-o ")[1].split()[0]
    text = target.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and "<graphml" in text and "Marie Curie" in text


def test_the_deleted_document_is_gone(tour: Tour) -> None:
    deleted = tour.output("cogmill delete ").line
    name = deleted.split("--document ")[1].split()[0]
    script = "\n".join([*tour.setup, 'cogmill search "Eiffel Tower" --dataset sample --json'])
    code, out, err = run(script, tour.cwd, tour.env, LINE_TIMEOUT_S)
    assert code == 0, err
    names = {s["document_name"] for r in json.loads(out)["results"] for s in r["sources"]}
    assert names and name not in names, names


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def json_values(text: str) -> Iterator[object]:
    """The JSON values printed one after another (curl prints no newline after a body)."""
    decoder, at = json.JSONDecoder(), 0
    while (at := text.find("{", at)) != -1:
        value, end = decoder.raw_decode(text, at)
        yield value
        at = end


def test_the_serve_block_answers_over_http(tour: Tour) -> None:
    block = blocks()["tour-serve"]
    assert "8000" in block
    lines = shell_lines(block.replace("8000", str(free_port())))
    # Whatever fails, the background server goes with the script.
    script = "\n".join(["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"])
    script = "\n".join([script, *tour.setup, *lines])
    code, out, err = run(script, tour.cwd, tour.env, SERVE_TIMEOUT_S)
    assert code == 0, f"exit {code}\n{out}\n{err}"
    health, found = list(json_values(out))
    assert health == {"status": "ok"}, health
    assert isinstance(found, dict) and found["results"], found
    assert found["results"][0]["sources"][0]["document_name"] == "marie_curie.txt", found
