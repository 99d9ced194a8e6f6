"""The whole embedded path through the real CLI: add -> cognify (Celery tasks) -> search."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.services.demo import SAMPLE_CORPUS


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cogmill-home")


@pytest.fixture(scope="module")
def cli(home: Path):  # noqa: ANN201
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args), env={"COGMILL_HOME": str(home)})
        return result.exit_code, result.output

    return run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    shutil.copytree(SAMPLE_CORPUS, folder, dirs_exist_ok=True)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    return folder


@pytest.fixture(scope="module")
def cognified(cli, corpus: Path) -> str:  # noqa: ANN001
    code, output = cli("add", str(corpus), "--dataset", "sample")
    assert code == 0, output
    code, output = cli("cognify", "sample")
    assert code == 0, output
    return output


def top_documents(cli, query: str, search_type: str, k: int = 5) -> list[str]:  # noqa: ANN001
    code, output = cli(
        "search", query, "--dataset", "sample", "--type", search_type, "--top-k", str(k), "--json"
    )
    assert code == 0, output
    body = json.loads(output)
    assert body["query"] == query and body["search_type"] == search_type
    names = []
    for result in body["results"]:
        assert isinstance(result["score"], float) and result["sources"], result
        names.extend(s["document_name"] for s in result["sources"])
    return list(dict.fromkeys(names))


def test_add_reports_rejections_and_unchanged(cli, corpus: Path, cognified: str) -> None:  # noqa: ANN001
    code, output = cli("add", str(corpus), "--dataset", "sample")
    assert code == 0
    assert "unchanged  marie_curie.txt" in output
    assert "rejected   empty.txt: " in output and "empty" in output.split("empty.txt:")[1].lower()
    assert "rejected   image.png: " in output


def test_cognify_reports_counts(cognified: str) -> None:
    assert "succeeded" in cognified
    [line] = [line for line in cognified.splitlines() if line.startswith("documents ")]
    counts = dict(part.strip().rsplit(" ", 1) for part in line.split(","))
    assert int(counts["documents"]) == 8
    assert int(counts["entities"]) > 20 and int(counts["relationships"]) > 5


def test_recognify_does_no_work_for_unchanged_documents(cli, cognified: str) -> None:  # noqa: ANN001
    code, output = cli("cognify", "sample")
    assert code == 0
    assert "nothing to do" in output and "documents 0," in output


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Where was Marie Curie born?", "marie_curie.txt"),
        ("Who founded Siemens?", "companies.csv"),
        ("Which river flows through London?", "london.md"),
        ("What is the capital of Poland?", "warsaw.md"),
    ],
)
@pytest.mark.parametrize("search_type", ["CHUNKS", "GRAPH_COMPLETION"])
def test_search_puts_the_right_document_first(cli, cognified, query, expected, search_type) -> None:  # noqa: ANN001
    assert top_documents(cli, query, search_type)[0] == expected


def test_two_hop_question_follows_an_extracted_relationship(cli, cognified) -> None:  # noqa: ANN001
    # alan_turing.txt: Turing -born in-> London; london.md: River Thames -flows through-> London.
    # The answer (the Thames) is reached through the extracted born_in edge.
    query = "Which river flows through the city where Alan Turing was born?"
    assert top_documents(cli, query, "GRAPH_COMPLETION", k=3)[:2] == [
        "alan_turing.txt",
        "london.md",
    ]
    code, output = cli(
        "search", query, "--dataset", "sample", "--type", "GRAPH_COMPLETION", "--json", "-k", "3"
    )
    assert code == 0, output
    lines = [r["text"].split("\n")[0] for r in json.loads(output)["results"]]
    assert "Alan Turing —born in→ London" in lines, lines
    assert any("Thames" in line and line.endswith("→ London") for line in lines), lines
    # Without --type the router picks its default (no specific cue): both hops' passages.
    code, output = cli("search", query, "--dataset", "sample", "--json", "--top-k", "3")
    assert code == 0, output
    routed = json.loads(output)
    assert routed["search_type"] == "GRAPH_PPR"
    assert routed["route"]["reason"].startswith("no strong specific cue")
    names = [s["document_name"] for r in routed["results"] for s in r["sources"]]
    assert {"alan_turing.txt", "london.md"} <= set(names), names


def test_bad_dataset_name_is_a_usage_error(cli) -> None:  # noqa: ANN001
    code, output = cli("add", str(SAMPLE_CORPUS), "--dataset", "my data/set")
    assert code == 2
    assert "invalid dataset name" in output and "Traceback" not in output


def test_missing_path_and_unknown_dataset(cli, tmp_path: Path) -> None:  # noqa: ANN001
    code, output = cli("add", str(tmp_path / "nope.txt"), "--dataset", "other")
    assert code == 1 and "no such file or directory" in output
    code, output = cli("cognify", "never-added")
    assert code == 2 and "does not exist" in output


@pytest.mark.slow  # four `cogmill` processes, each importing the whole CLI (seconds)
def test_console_script_exit_codes(home: Path) -> None:
    exe = [sys.executable, "-m", "api.cli"]
    env = {"COGMILL_HOME": str(home), "PATH": "/usr/bin:/bin"}
    # Settings out of bounds, unparsable or not JSON: a line each and what to do, exit 2.
    cases = [
        (
            {"COGMILL_SERVE_WARM_UP": "10001", "COGMILL_WORKER_THREADS": "many"},
            [
                "COGMILL_WORKER_THREADS must be a whole number, got 'many'",
                "COGMILL_SERVE_WARM_UP must be at most 10000, got '10001'",
            ],
        ),
        (
            {"COGMILL_LLM_OUTAGE_PAUSES_SECONDS": "[15, 60"},
            ["COGMILL_LLM_OUTAGE_PAUSES_SECONDS is not JSON"],
        ),
    ]
    # The processes are independent: started together, their start-up times overlap.
    runs = [([*exe, "search", "x"], env), ([*exe, "search", "x", "--dataset", "a b"], env)]
    runs += [([*exe, "serve"], {**env, **settings}) for settings, _ in cases]
    started = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        for args, e in runs
    ]
    stderrs = [process.communicate(timeout=300)[1] for process in started]
    codes = [process.returncode for process in started]
    assert codes[0] == 2  # usage
    assert codes[1] == 2 and stderrs[1].startswith("error: invalid dataset name")
    for code, stderr, (_, expected) in zip(codes[2:], stderrs[2:], cases, strict=True):
        lines = stderr.splitlines()
        assert code == 2 and len(lines) == len(expected) + 1, stderr
        for line, text in zip(lines, [*expected, "fix or unset those settings"], strict=True):
            assert line.startswith("error: ") and text in line, lines


@pytest.mark.slow
def test_delete_a_document_removes_what_only_it_supported(cli, cognified) -> None:  # noqa: ANN001
    query = "Which river flows through London?"
    assert "london.md" in top_documents(cli, query, "CHUNKS", k=8)
    code, output = cli("delete", "--dataset", "sample", "--document", "london.md")
    assert code == 0 and "deleted document london.md" in output, output
    assert "london.md" not in top_documents(cli, query, "CHUNKS", k=8)
    assert "london.md" not in top_documents(cli, query, "GRAPH_COMPLETION", k=10)
    code, output = cli("delete", "--dataset", "sample", "--document", "london.md")
    assert code == 2 and "no document named" in output
    # Shared facts stay: Alan Turing was born in London is alan_turing.txt's.
    turing = top_documents(cli, "Where was Alan Turing born?", "GRAPH_COMPLETION", k=3)
    assert turing[0] == "alan_turing.txt"
