"""Errors as the faces answer them: the one mapping HTTP, MCP and the CLI share.

An error's code, HTTP status and exit code come from its class (core/errors.py). A face adds
only a hint naming its own way on (a route, a tool, a command), chosen by the error's code.
A 5xx error's message may name hosts, paths or a library's words: over HTTP and MCP the
answer is the class's `public_message` and the log gets the rest; the CLI, run by the
operator on the machine, prints it whole. Anything that is not a CogmillError is a bug: a
500 (exit 1) with a message that shows nothing of it, the traceback in the server log.

`python -m api.errors` prints the table of every error (docs/errors.md).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from dataclasses import dataclass
from typing import Literal

from core.errors import CogmillError

log = logging.getLogger("cogmill.errors")

Face = Literal["http", "mcp", "cli"]
FACES: tuple[Face, ...] = ("http", "mcp", "cli")
BUG = "unexpected server error (a bug); see the server log"
LOGGED = " (the server log has the details)"
# What to do next, by error code, in each face's own terms; `{error.x}` reads the error.
HINTS: dict[Face, dict[str, str]] = {
    "http": {
        "dataset_not_found": "add documents with POST /api/v1/datasets/{error.dataset}/data first",
        "document_not_found": "GET /api/v1/datasets/{error.dataset}/data lists its documents",
        "job_not_found": "GET /api/v1/jobs lists the known jobs",
        "job_not_resumable": "GET /api/v1/jobs/{error.job_id} shows its status",
        "job_running": "GET /api/v1/jobs/{error.job_ids[0]}/events follows it, "
        "POST /api/v1/jobs/{error.job_ids[0]}/cancel cancels it",
        "node_not_found": "search the dataset (POST /api/v1/search) for node ids",
        "webhook_not_found": "GET /api/v1/webhooks lists them",
    },
    "mcp": {
        "dataset_not_found": "add documents to it with add_text (or add_files) first",
        "document_not_found": "the resource cogmill://datasets/{error.dataset}/documents lists "
        "the dataset's documents",
        "job_not_found": "cognify and remember return the ids of their jobs",
        "job_running": "job_status polls it",
        "node_not_found": "search the dataset for node ids",
    },
    "cli": {
        "dataset_not_found": "`cogmill add` documents to it first",
        "job_not_found": "`cogmill jobs list` shows the known jobs",
        "job_not_resumable": "`cogmill jobs show {error.job_id}` shows its status",
        "job_running": "`cogmill jobs watch {error.job_ids[0]}` follows it, "
        "`cogmill jobs cancel {error.job_ids[0]}` cancels it",
        "webhook_not_found": "`cogmill webhooks list` shows them",
    },
}


@dataclass(frozen=True)
class Answer:
    """What a face says for an error: the code, HTTP status and exit code, and one line."""

    code: str
    status: int
    exit_code: int
    message: str


def answer(error: BaseException, face: Face, where: str = "") -> Answer:
    """How `face` answers `error`; logs what the answer leaves out (`where`: the request or
    tool, for the log line)."""
    if not isinstance(error, CogmillError):
        if face == "cli":  # no log handler here: a traceback would be many lines
            return Answer(CogmillError.code, 500, 1, f"unexpected error (a bug): {_named(error)}")
        log.error("unhandled_error face=%s where=%s", face, where, exc_info=error)
        return Answer(CogmillError.code, 500, 1, BUG)
    kind = type(error)
    if kind.status >= 500 and face != "cli":
        log.warning("server_error code=%s face=%s where=%s", kind.code, face, where, exc_info=error)
        return Answer(kind.code, kind.status, kind.exit_code, kind.public_message + LOGGED)
    message = " ".join(str(error).split()) or kind.public_message  # one line
    hint = HINTS[face].get(kind.code)
    if hint:
        message = f"{message}; {hint.format(error=error)}"
    return Answer(kind.code, kind.status, kind.exit_code, message)


def _named(error: BaseException) -> str:
    """An unforeseen exception's type and the start of its first line, for a bug report."""
    first = (str(error).splitlines() or [""])[0][:200]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# -- the table of every error (docs/errors.md) ------------------------------------------------

PACKAGES = ("core", "pipelines", "retrieval", "runtime", "workers", "api")


def error_classes() -> list[type[CogmillError]]:
    """Every CogmillError class, after importing every module of the project (depth first,
    as the tree in core/errors.py draws it)."""
    for package in PACKAGES:
        root = importlib.import_module(package)
        for module in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    found: list[type[CogmillError]] = []

    def walk(kind: type[CogmillError]) -> None:
        found.append(kind)
        for sub in sorted(kind.__subclasses__(), key=lambda k: (k.status, k.code)):
            walk(sub)

    walk(CogmillError)
    return found


def error_table() -> str:
    """The errors as a Markdown table: code, HTTP status, exit code, class and meaning."""
    rows = [
        "| code | HTTP | exit | class | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for kind in error_classes():
        meaning = " ".join((kind.__doc__ or "").split("\n\n")[0].split())
        where = f"`{kind.__module__}.{kind.__qualname__}`"
        rows.append(f"| `{kind.code}` | {kind.status} | {kind.exit_code} | {where} | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(error_table())
