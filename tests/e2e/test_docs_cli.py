"""docs/cli.md holds the real command line: every command is named there, and every `--json`
output has exactly the keys and types its documented shape says, checked against real output
of an embedded home (offline extractor, a local webhook receiver, a tiny eval bench)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from api.cli import app
from tests.docs_blocks import ROOT, blocks
from tests.integration.test_eval import write_bench
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

NOTES = {
    "turing.txt": "Alan Turing was born in London. Alan Turing worked at Bletchley Park.",
    "thames.txt": "The River Thames flows through London. London is the capital of England.",
}
QUESTION = "Which river flows through the city where Alan Turing was born?"


def shapes() -> dict[str, Any]:
    """The documented shapes, by name."""
    return {
        name.removeprefix("schema-"): json.loads(text)
        for name, text in blocks("cli.md", "schema-").items()
    }


KINDS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def problems(value: Any, shape: Any, known: dict[str, Any], at: str = "$") -> list[str]:
    """Where `value` differs from `shape` (the notation of docs/cli.md's JSON section)."""
    if isinstance(shape, str):
        for kind in (k.strip() for k in shape.split("|")):
            if kind in known:
                if not problems(value, known[kind], known, at):
                    return []
            elif KINDS[kind](value):
                return []
        return [f"{at}: {value!r:.80} is not {shape}"]
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{at}: {value!r:.80} is not a list"]
        return [
            p for i, item in enumerate(value) for p in problems(item, shape[0], known, f"{at}[{i}]")
        ]
    if not isinstance(value, dict):
        return [f"{at}: {value!r:.80} is not an object"]
    if set(shape) == {"*"}:
        return [p for k, v in value.items() for p in problems(v, shape["*"], known, f"{at}.{k}")]
    fields = dict(shape)
    if "..." in fields:  # the fields of another shape, then these
        fields = {**known[fields.pop("...")], **fields}
    found = [f"{at}: undocumented key {k!r}" for k in value if k not in fields]
    found += [f"{at}: missing key {k!r}" for k in fields if k not in value]
    for key in fields.keys() & value.keys():
        found += problems(value[key], fields[key], known, f"{at}.{key}")
    return found


def test_the_shape_checker_catches_differences() -> None:
    known = shapes()
    source = {"document_id": "d", "document_name": "n", "chunk_id": "c"}
    result = {"text": "t", "score": 1.0, "sources": [source], "evidence": []}
    assert problems(result, known["Result"], known) == []
    assert problems({**result, "route": None}, known["Result"], known)  # an extra key
    assert problems({**result, "score": "high"}, known["Result"], known)  # a wrong type
    assert problems({"text": "t"}, known["Result"], known)  # missing keys


def test_every_command_is_in_the_reference() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").replace("\\|", "|")
    todo, missing = [([], get_command(app))], []
    while todo:
        words, command = todo.pop()
        if words and f"cogmill {' '.join(words)}" not in text:
            missing.append(" ".join(words))
        todo += [([*words, name], sub) for name, sub in getattr(command, "commands", {}).items()]
    # A group documented by its subcommands (`cogmill tenants create|list|budget`) is named.
    missing = [
        m for m in missing if not re.search(rf"cogmill {m.split()[0]} [\w|]*{m.split()[-1]}", text)
    ]
    assert missing == [], f"docs/cli.md does not name: {missing}"


@dataclass
class Cli:
    """`cogmill` in this process on one embedded home; `run` gives stdout (exit 0 required)."""

    home: Path
    job_id: str = ""

    def run(self, *args: str) -> str:
        env = {"COGMILL_HOME": str(self.home / "home"), "COGMILL_WEBHOOK_ALLOW_PRIVATE": "true"}
        result = CliRunner().invoke(app, list(args), env=env)
        assert result.exit_code == 0, (args, result.output)
        return result.stdout


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    made = Cli(tmp_path_factory.mktemp("cli-docs"))
    for name, text in NOTES.items():
        (made.home / name).write_text(text, encoding="utf-8")
    made.run("add", *(str(made.home / name) for name in NOTES), "--dataset", "docs")
    with WebhookReceiver() as receiver:  # its delivery log is one of the JSON outputs
        done = made.run("cognify", "docs", "--webhook", receiver.url)
    made.job_id = re.search(r"^job (\w+): succeeded$", done, re.MULTILINE)[1]  # type: ignore[index]
    return made


def test_search_route_and_recall_json(cli: Cli) -> None:
    known = shapes()
    routed = json.loads(cli.run("search", QUESTION, "-d", "docs", "--json", "--session", "s1"))
    assert problems(routed, known["Search"], known) == [], routed
    assert routed["route"] is not None and routed["results"] and routed["answer"] is None
    assert any(r["evidence"] for r in routed["results"]), routed["results"]
    typed = json.loads(cli.run("search", QUESTION, "-d", "docs", "--type", "CHUNKS", "--json"))
    assert problems(typed, known["Search"], known) == [] and typed["route"] is None
    assert problems(json.loads(cli.run("route", QUESTION, "--json")), known["Route"], known) == []
    recalled = json.loads(cli.run("recall", QUESTION, "-s", "s1", "-d", "docs", "--json"))
    assert problems(recalled, known["Recall"], known) == [] and recalled["results"], recalled


def test_cognify_jobs_and_webhooks_json(cli: Cli) -> None:
    known = shapes()
    estimate = json.loads(cli.run("cognify", "docs", "--estimate", "--json"))
    assert problems(estimate, known["Estimate"], known) == []
    job_id = cli.job_id
    listed = json.loads(cli.run("jobs", "list", "--json"))
    assert problems(listed, ["Job"], known) == [] and listed[0]["id"] == job_id, listed
    shown = json.loads(cli.run("jobs", "show", job_id[:10]))
    assert problems(shown, known["JobReport"], known) == [], shown
    assert {"entities_merged", "relationships_merged"} <= set(shown["counts"])
    lines = cli.run("jobs", "webhooks", job_id, "--json").splitlines()
    assert lines, "no delivery attempt was logged"
    for line in lines:
        assert problems(json.loads(line), known["Attempt"], known) == [], line


@pytest.mark.slow
def test_eval_json(cli: Cli) -> None:
    known = shapes()
    data = write_bench(cli.home / "bench")
    args = ["eval", "--json", "--data", str(data), "--home", str(cli.home / "eval")]
    report = json.loads(cli.run(*args, "--types", "CHUNKS").strip().splitlines()[-1])
    assert problems(report, known["Eval"], known) == [] and report["musique"]["CHUNKS"], report


def test_schedules_json(cli: Cli) -> None:
    from api.services.schedules import ScheduleRun

    known = shapes()
    cli.run("schedules", "add", "docs", "--cognify", "--every", "1h")
    listed = json.loads(cli.run("schedules", "list", "--json"))
    assert problems(listed, ["Schedule"], known) == [] and len(listed) == 1, listed
    assert listed[0]["runs"] and listed[0]["last_run"] is None, listed
    # No beat runs here to fire it: the latest run's shape is checked against its model.
    assert set(known["ScheduleRun"]) == set(ScheduleRun.model_fields)
