"""The error tree: every error cogmill raises on purpose knows its code, HTTP status and exit
code, and HTTP, MCP and the CLI answer each alike through the one mapping (api/errors.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

import core.errors
from api.cli.render import guarded
from api.errors import BUG, HINTS, LOGGED, answer, error_classes, error_table
from api.http.errors import error_response
from api.mcp.errors import tool_error
from core.errors import CogmillError, RateLimited, Unauthorized, problem, problems
from core.llm.client import LLMError

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CLASSES = error_classes()
# A message naming a host and a path: what a 5xx answer over the network must not show.
SECRET = "bolt://neo4j-7.internal:7687 at /srv/cogmill/graph refused"
# Errors whose constructor takes more than a message, each with a sample instance.
SAMPLES: dict[str, Callable[[Any], CogmillError]] = {
    "DatasetNotFoundError": lambda kind: kind("papers"),
    "DocumentNotFoundError": lambda kind: kind("papers", "a.txt", "no document 'a.txt'"),
    "NodeNotFoundError": lambda kind: kind("papers", "'n1'"),
    "JobRunningError": lambda kind: kind("papers", ["0123456789abcdef"]),
    "JobNotFoundError": lambda kind: kind("0123456789abcdef"),
    "JobNotResumableError": lambda kind: kind("0123456789abcdef", "job is running"),
    "WebhookNotFoundError": lambda kind: kind("w-1"),
    "DatasetBusyError": lambda kind: kind("papers", ["0123456789abcdef"]),
    "ExtractionFailed": lambda kind: kind({0: LLMError(SECRET)}, [None]),
    "EventExtractionFailed": lambda kind: kind({0: LLMError(SECRET)}, [None]),
    "PipelineStepError": lambda kind: kind("extract_graph", SECRET),
}
# The CLI's exit code by HTTP status: 2 when the command was wrong, 1 when it failed.
EXIT_CODES = {400: 2, 401: 2, 403: 2, 404: 2, 413: 2, 415: 2, 422: 2}


def sample(kind: type[CogmillError]) -> CogmillError:
    make = SAMPLES.get(kind.__name__)
    return make(kind) if make else kind(SECRET)


def names(kinds: list[type[CogmillError]]) -> list[str]:
    return [kind.__name__ for kind in kinds]


def cli_answer(error: BaseException, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    def body() -> None:
        raise error

    with pytest.raises(typer.Exit) as stop:
        guarded(body)
    return stop.value.exit_code, capsys.readouterr().err


def test_the_tree_holds_every_project_error() -> None:
    """The walk finds the domain errors of every layer, each drawn in core/errors.py's tree."""
    found = set(names(CLASSES))
    expected = """CatalogError PlanError JobNotFoundError DatasetNotFoundError
        DocumentNotFoundError JobRunningError AccessDeniedError QuotaExceededError TenantError
        NotAvailableError StoreError ModelNotInstalledError SessionError WebhookError
        InvalidResponseModel ReadOnlyViolation BudgetExceeded InvalidBudget JobNotResumableError
        CypherError LLMError"""
    assert set(expected.split()) <= found, set(expected.split()) - found
    doc = core.errors.__doc__ or ""
    undrawn = [name for name in found if not re.search(rf"\b{name}\b", doc)]
    assert not undrawn, f"add them to the tree in core/errors.py: {undrawn}"


@pytest.mark.parametrize("kind", CLASSES, ids=names(CLASSES))
def test_every_error_has_a_code_a_status_and_an_exit_code(kind: type[CogmillError]) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", kind.code), kind.code
    assert 400 <= kind.status <= 599, kind.status
    assert kind.exit_code == EXIT_CODES.get(kind.status, 1), (kind.status, kind.exit_code)
    assert kind.__doc__, "its docstring is its meaning in docs/errors.md"
    if kind.status >= 500:
        assert kind.public_message, "what a 5xx answer says instead of its message"


def test_a_code_names_one_kind_of_error() -> None:
    """A class that sets a code is the only one with it; a subclass may keep its parent's
    (AccessDeniedError is a `forbidden` for clients)."""
    setting = [kind for kind in CLASSES if "code" in vars(kind)]
    codes = [kind.code for kind in setting]
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)


@pytest.mark.parametrize("kind", CLASSES, ids=names(CLASSES))
def test_http_mcp_and_cli_answer_an_error_alike(
    kind: type[CogmillError], capsys: pytest.CaptureFixture[str]
) -> None:
    error = sample(kind)
    response = error_response(error, "GET /test")
    body = json.loads(bytes(response.body))["error"]
    tool = str(tool_error("test", error))
    exit_code, printed = cli_answer(error, capsys)

    assert response.status_code == kind.status and body["code"] == kind.code
    assert exit_code == kind.exit_code
    assert printed.startswith("error: ") and printed.count("\n") == 1, printed
    own = " ".join(str(error).split())
    if kind.status >= 500:  # hosts and paths stay in the log; the operator's CLI shows them
        assert body["message"] == tool == kind.public_message + LOGGED
        assert SECRET not in body["message"]
        assert own in printed
        return
    for face, said in (("http", body["message"]), ("mcp", tool), ("cli", printed)):
        assert own in said, (face, said)
        hint = HINTS[face].get(kind.code)  # type: ignore[index]
        if hint is not None:
            assert said.rstrip().endswith(hint.format(error=error)), (face, said)


def test_an_error_that_is_not_cogmills_is_a_bug_on_every_face(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The blanket ValueError -> 422 relayed a library's words; now it is a 500 that shows
    nothing of it, and the log has the traceback."""
    library = ValueError("Stop argument for islice() must be None or an integer")
    response = error_response(library, "GET /api/v1/datasets/x/data")
    body = json.loads(bytes(response.body))["error"]
    assert response.status_code == 500 and body == {"code": "internal_error", "message": BUG}
    assert str(tool_error("list_documents", library)) == BUG
    assert len(caplog.records) == 2
    assert all(record.exc_info and record.exc_info[1] is library for record in caplog.records)
    exit_code, printed = cli_answer(library, capsys)
    assert exit_code == 1 and printed.startswith("error: unexpected error (a bug): ValueError")


def test_http_adds_the_headers_an_error_calls_for() -> None:
    assert error_response(Unauthorized("send a key")).headers["www-authenticate"] == "Bearer"
    limited = error_response(RateLimited("slow down", retry_after=4.2))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "5"


def test_the_face_hint_follows_the_code() -> None:
    from api.services.datasets import DatasetNotFoundError

    missing = DatasetNotFoundError("papers")
    assert answer(missing, "http").message.endswith("POST /api/v1/datasets/papers/data first")
    assert answer(missing, "mcp").message.endswith("add_text (or add_files) first")
    assert answer(missing, "cli").message.endswith("`cogmill add` documents to it first")


@pytest.mark.parametrize(
    ("error", "said"),
    [
        ({"type": "greater_than", "ctx": {"gt": 0}, "input": 0}, "--n must be more than 0, got 0"),
        ({"type": "int_parsing", "input": "x"}, "--n must be a whole number, got 'x'"),
        ({"type": "missing", "input": {}}, "--n is required"),
        ({"type": "value_error", "msg": "Value error, give usd"}, "--n give usd"),
        ({"type": "url_type", "msg": "URL is odd", "input": 3}, "--n URL is odd, got 3"),
    ],
)
def test_pydantic_problems_read_in_cogmills_words(error: dict[str, Any], said: str) -> None:
    assert problem("--n", error) == said


def test_a_whole_validation_error_reads_one_line_per_problem() -> None:
    from pydantic import ValidationError

    from core.models.jobs import Budget

    with pytest.raises(ValidationError) as caught:
        Budget(tokens=0)
    assert problems(caught.value.errors(), "budget.") == [
        "budget.tokens must be more than 0, got 0"
    ]


def test_the_docs_list_every_error() -> None:
    """docs/errors.md holds the table `python -m api.errors` prints."""
    assert error_table() in (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
