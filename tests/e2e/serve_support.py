"""A real `cogmill serve` in a process of its own, for the end-to-end tests that need the
whole server (uvicorn, its connection guard, the embedded worker threads)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

from tests.e2e.faults.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 180  # the server loads its app and worker threads: slow on a loaded machine


@contextmanager
def cogmill_serve(
    home: Path,
    settings: Mapping[str, object],
    *,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[str]:
    """`cogmill serve` on a free loopback port with `home` and `settings` as COGMILL_*
    variables, its output in `home`/serve.log: its base URL once /health answers. Stopped on
    exit."""
    port = free_port()
    env = os.environ | {"PYTHONPATH": str(ROOT), "COGMILL_HOME": str(home)}
    env |= {f"COGMILL_{name.upper()}": str(value) for name, value in settings.items()}
    command = [sys.executable, "-m", "api.cli", "serve", "--port", str(port)]
    log = home / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=out, stderr=out, preexec_fn=preexec_fn
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "cogmill serve did not answer /health in time"
            with suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=10).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
