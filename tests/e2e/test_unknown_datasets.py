"""A dataset that does not exist (or is another tenant's) is an error on every face that names
one: the CLI exits 1 with one line, HTTP answers 404 in the error schema, an MCP tool answers
`isError`; a search or recall over several datasets names each missing one and no other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from api.mcp.face import Face
from api.mcp.server import build_server
from api.services.add import add_files
from api.services.tenants import Tenants
from core.access import LOCAL, Caller, Role
from core.settings import Settings
from runtime import Runtime

pytestmark = pytest.mark.e2e

OWNER, OTHER = Caller("owner", Role.WRITER), Caller("other", Role.WRITER)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("unknown-home")
    rt = Runtime(Settings(_env_file=None, home=home))  # type: ignore[call-arg]
    note = home / "note.txt"
    note.write_text("Ada Lovelace wrote the first algorithm.", encoding="utf-8")
    add_files(rt, "known", [("note.txt", note)])  # the local tenant's
    add_files(rt, "private", [("note.txt", note)], caller=OWNER)  # another tenant's
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("unknown-cli")
    (home / "note.txt").write_text("Ada Lovelace wrote the first algorithm.", encoding="utf-8")
    assert cli(home, "add", str(home / "note.txt"), "--dataset", "known")[0] == 0
    return home


def cli(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_app, list(args), env={"COGMILL_HOME": str(home)})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        (["search", "Who?", "-d", "nosuch"], "dataset 'nosuch' does not exist"),
        (["search", "Who?", "-d", "known", "-d", "a", "-d", "b"], "datasets 'a', 'b' do not exist"),
        (["recall", "Who?", "--dataset", "nosuch"], "dataset 'nosuch' does not exist"),
        (["export", "--dataset", "nosuch"], "dataset 'nosuch' does not exist"),
        (["cognify", "nosuch"], "dataset 'nosuch' does not exist"),
        (["delete", "--dataset", "nosuch", "--yes"], "dataset 'nosuch' does not exist"),
    ],
)
def test_cli_exits_2_with_one_line(cli_home: Path, args: list[str], missing: str) -> None:
    code, stdout, stderr = cli(cli_home, *args)
    assert code == 2, (stdout, stderr)  # not found: the command named something wrong
    assert stderr.startswith(f"error: {missing}") and stderr.count("\n") == 1, stderr
    assert "'known'" not in stderr and stdout == ""
    assert cli(cli_home, "search", "Ada", "-d", "known", "--type", "CHUNKS")[0] == 0


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    tenants = Tenants(runtime.state)
    for caller in (OWNER, OTHER):
        tenants.create_tenant(caller.tenant or "")
    key, _ = tenants.create_key(OTHER.tenant or "", OTHER.role)
    with TestClient(create_app(runtime), headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


def assert_404(response: Any, *words: str) -> None:
    assert response.status_code == 404, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == "dataset_not_found", body
    assert all(word in body["error"]["message"] for word in words), body


def test_http_answers_404_for_unknown_and_other_tenants_datasets(client: TestClient) -> None:
    mine = client.post(
        "/api/v1/datasets/mine/data",
        json={"documents": [{"name": "a.txt", "text": "Grace Hopper wrote a compiler."}]},
    )
    assert mine.status_code == 200, mine.text
    search = client.post("/api/v1/search", json={"query": "Who?", "datasets": ["nosuch"]})
    assert_404(search, "dataset 'nosuch' does not exist")
    both = {"query": "Who?", "datasets": ["mine", "private", "nosuch"]}
    answer = client.post("/api/v1/search", json=both)
    assert_404(answer, "datasets 'private', 'nosuch' do not exist")
    assert "'mine'" not in answer.text
    recall = client.post("/api/v1/recall", json={"query": "Who?", "datasets": ["private"]})
    assert_404(recall, "dataset 'private' does not exist")
    for path in ("/api/v1/datasets/private/data", "/api/v1/datasets/private/graph"):
        assert_404(client.get(path), "'private'")
    ok = client.post("/api/v1/search", json={"query": "Who?", "datasets": ["mine"]})
    assert ok.status_code == 200, ok.text


@dataclass(frozen=True)
class As:
    """The MCP face of one caller on the runtime."""

    runtime: Runtime
    caller: Caller

    def face(self, request: Any) -> Face:
        return Face(self.runtime, self.caller, remote=True)


def mcp_calls(runtime: Runtime, caller: Caller, calls: dict[str, tuple[str, dict]]) -> dict:
    @asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[As]:
        yield As(runtime, caller)

    async def session() -> dict[str, Any]:
        async with Client(build_server(lifespan)) as mcp:
            return {key: await mcp.call_tool(*call) for key, call in calls.items()}

    return asyncio.run(session())


def test_mcp_tools_answer_is_error(runtime: Runtime) -> None:
    calls = {
        "search": ("search", {"query": "Who?", "datasets": ["known", "private", "gone"]}),
        "recall": ("recall", {"query": "Who?", "datasets": ["nosuch"]}),
        "documents": ("list_documents", {"dataset": "private"}),
        "ok": ("search", {"query": "Who?", "datasets": ["known"], "search_type": "CHUNKS"}),
    }
    answers = mcp_calls(runtime, LOCAL, calls)
    expected = {
        "search": "datasets 'private', 'gone' do not exist",
        "recall": "dataset 'nosuch' does not exist",
        "documents": "dataset 'private' does not exist",
    }
    for key, words in expected.items():
        message = " ".join(getattr(block, "text", "") for block in answers[key].content)
        assert answers[key].is_error and words in message, (key, message)
        assert "'known'" not in message
    assert not answers["ok"].is_error
