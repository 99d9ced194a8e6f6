"""The command line's manners, as a user meets them: `--version`; help text like git's and
docker's (upper-case placeholders, whole words on every line); usage errors as one stderr line;
a whole dataset deleted only when confirmed; `jobs list` with a header and `--json`; job ids
by a unique prefix; progress lines on stderr when stderr is no terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner, Result

from api.cli import app
from api.services import jobs
from core.models.jobs import Job, JobStatus
from core.settings import Settings
from retrieval.models import SearchType
from runtime import Runtime
from workers.jobs import JobNotFoundError, JobTracker

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def cogmill(home: Path, *args: str, stdin: int | None = None) -> subprocess.CompletedProcess:
    """The console command as a script runs it: stdin, stdout and stderr are no terminal."""
    env = {**os.environ, "COGMILL_HOME": str(home), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        timeout=600,
    )


def cli(home: Path, *args: str) -> Result:
    """The same in this process (faster; stdin, stdout and stderr are no terminal either)."""
    env = {"COGMILL_HOME": str(home), "COLUMNS": "80"}
    return CliRunner().invoke(app, list(args), env=env, prog_name="cogmill")


def command_paths() -> list[list[str]]:
    """Every command and group, as the words that name it."""
    found, todo = [], [([], get_command(app))]
    while todo:
        words, command = todo.pop()
        found.append(words)
        for name, sub in getattr(command, "commands", {}).items():
            todo.append(([*words, name], sub))
    return sorted(found)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli-home")
    note = home / "note.txt"
    note.write_text("Ada Lovelace wrote the first algorithm with Charles Babbage.", "utf-8")
    for dataset in ("keep", "drop"):
        assert cli(home, "add", str(note), "--dataset", dataset).exit_code == 0
    return home


@pytest.mark.slow
def test_help_reads_like_git_and_docker(home: Path) -> None:
    paths = command_paths()
    assert ["search"] in paths and ["jobs", "list"] in paths
    for words in paths:
        done = cli(home, *words, "--help")
        text = done.stdout
        assert done.exit_code == 0 and text.startswith("Usage: cogmill"), (words, done.output)
        noise = re.findall(r"<\w[\w\[\]]*>|\{\w+\}|\[required\]|╭|│", text)
        assert not noise, (words, noise)
        lines = text.splitlines()
        assert all(len(line) <= 80 for line in lines), (words, max(lines, key=len))
        for line in lines:  # no word cut at a line's end (at a hyphen, say)
            assert not re.search(r"[a-z]-$", line), (words, line)
    search = cli(home, "search", "--help").stdout
    assert "Usage: cogmill search [OPTIONS] QUERY\n" in search
    assert "-k, --top-k N" in search and "-d, --dataset DATASET" in search
    words = set(re.findall(r"[A-Z_]+", search))
    assert {t.value for t in SearchType} <= words  # every type, upper case, never cut
    assert "PATH..." in cli(home, "add", "--help").stdout


def test_placeholders_name_values_not_parameters() -> None:
    """`--sync SOURCE`, not the Python parameter behind it (`--sync SYNC_SOURCE`)."""
    found, todo = [], [([], get_command(app))]
    while todo:
        words, command = todo.pop()
        todo += [([*words, name], sub) for name, sub in getattr(command, "commands", {}).items()]
        for param in command.params:
            longs = [opt[2:].replace("-", "_") for opt in param.opts if opt.startswith("--")]
            named = str(param.name)
            option = param.param_type_name == "option" and longs and named not in longs
            if option and param.metavar == named.upper():
                found.append(f"cogmill {' '.join(words)} --{longs[0]} {param.metavar}")
    assert not found, found


@pytest.mark.parametrize("name", ["chunks", "CHUNKS", "Chunks"])
def test_search_types_in_any_case(home: Path, name: str) -> None:
    done = cli(home, "search", "Ada", "-d", "keep", "--type", name, "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["search_type"] == "CHUNKS"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["search", "x"], "--dataset is missing"),
        (["add"], "PATH... is missing"),
        (["searhc", "x"], "no such command 'searhc'"),
        (["search", "x", "-d", "keep", "--type", "nope"], "--type must be one of CHUNKS, "),
        (["search", "x", "-d", "keep", "--top-k", "0"], "--top-k"),
    ],
)
def test_usage_errors_are_one_line(home: Path, args: list[str], words: str) -> None:
    done = cli(home, *args)
    assert done.exit_code == 2 and done.stdout == "", done.output
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert words in done.stderr and "--help` shows the usage" in done.stderr, done.stderr


@pytest.mark.slow
def test_the_console_script_too(home: Path) -> None:
    done = cogmill(home, "--version")
    assert done.returncode == 0 and done.stdout == f"cogmill {version('cogmill')}\n"
    done = cogmill(home, "search", "x")
    assert done.returncode == 2 and done.stderr == (
        "error: --dataset is missing; `cogmill search --help` shows the usage\n"
    )


def datasets(home: Path) -> str:
    return cli(home, "search", "Ada", "-d", "drop", "--type", "CHUNKS").stderr


@pytest.mark.slow
def test_deleting_a_dataset_asks_first(home: Path) -> None:
    refused = cli(home, "delete", "--dataset", "drop")
    assert refused.exit_code == 2 and "add --yes" in refused.stderr, refused.stderr
    assert "does not exist" not in datasets(home)
    # At a terminal: asked; "n" keeps it, "y" deletes it.
    for answer, code in (("n", 1), ("y", 0)):
        leader, follower = pty.openpty()
        os.write(leader, f"{answer}\n".encode())
        done = cogmill(home, "delete", "--dataset", "drop", stdin=follower)
        os.close(leader), os.close(follower)
        assert done.returncode == code, done
        assert "Delete dataset 'drop'" in done.stderr, done.stderr
        gone = "does not exist" in datasets(home)
        assert gone is (answer == "y"), answer
    refused = cli(home, "forget", "--dataset", "keep")
    assert refused.exit_code == 2 and "add --yes" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_cognify_progress_on_stderr_and_jobs_by_prefix(home: Path) -> None:
    done = cli(home, "cognify", "keep")
    assert done.exit_code == 0, done.output
    progress = done.stderr.splitlines()
    assert re.fullmatch(r"cognify keep: job [0-9a-f]{32}, 1 documents", progress[0]), progress
    assert "cognify keep" not in done.stdout and "succeeded" in done.stdout
    job_id = progress[0].split("job ")[1].split(",")[0]

    listed = cli(home, "jobs", "list")
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["JOB", "ID", "STATUS", "DATASET", "DOCUMENTS", "CREATED", "(UTC)"]
    assert rows[0].split()[:4] == [job_id, "succeeded", "keep", "1/1"], rows
    as_json = json.loads(cli(home, "jobs", "list", "--json").stdout)
    assert [job["id"] for job in as_json] == [row.split()[0] for row in rows]

    shown = cli(home, "jobs", "show", job_id[:8])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["id"] == job_id, shown.output
    assert cli(home, "jobs", "watch", job_id[:6]).exit_code == 0
    missing = cli(home, "jobs", "show", "ffffffff" if job_id[0] != "f" else "00000000")
    assert missing.exit_code != 0 and "no job" in missing.stderr


def test_an_ambiguous_prefix_names_the_candidates(tmp_path: Path) -> None:
    rt = Runtime(Settings(_env_file=None, home=tmp_path))  # type: ignore[call-arg]
    try:
        for job_id in ("abc123", "abc456", "abd789"):
            done = Job(
                id=job_id,
                dataset="d",
                pipeline="default",
                pipeline_version="1",
                status=JobStatus.SUCCEEDED,
            )
            JobTracker(rt.state).save(done)
        assert jobs.by_prefix(rt, "abd") == "abd789" and jobs.by_prefix(rt, "abc123") == "abc123"
        with pytest.raises(ValueError, match=r"'abc' is ambiguous \(abc123, abc456\)"):
            jobs.by_prefix(rt, "abc")
        with pytest.raises(JobNotFoundError):
            jobs.by_prefix(rt, "abe")
    finally:
        rt.close()
