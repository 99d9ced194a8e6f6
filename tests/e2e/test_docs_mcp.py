"""docs/mcp.md's Python examples, run as written with the pinned `mcp` SDK: over stdio
against `cogmill mcp` (offline extractor, embedded home), over HTTP against a `cogmill serve`
with API keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.docs_blocks import block
from tests.e2e.serve_support import cogmill_serve

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent  # where `cogmill` is installed


def run_example(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, **env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_the_stdio_example_runs(tmp_path: Path) -> None:
    done = run_example(block("mcp.md", "mcp-stdio"), tmp_path, {"COGMILL_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "cognify: succeeded", done.stdout
    assert lines[1].startswith("ada.txt Ada Lovelace wrote the first program"), done.stdout


@pytest.mark.slow
def test_the_http_example_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    rt = Runtime(Settings(_env_file=None, home=home))  # type: ignore[call-arg]
    try:  # a key first: the server then owns the home
        Tenants(rt.state).create_tenant("acme")
        key, _ = Tenants(rt.state).create_key("acme", Role.READER)
    finally:
        rt.close()
    with cogmill_serve(home, {}) as url:
        env = {"COGMILL_MCP_URL": f"{url}/mcp", "COGMILL_API_KEY": key}
        done = run_example(block("mcp.md", "mcp-http"), tmp_path, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "[]",
        "error: True Error executing tool search: dataset 'nosuch' does not exist; add "
        "documents to it with add_text (or add_files) first",
    ], done.stdout
