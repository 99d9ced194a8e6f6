"""A JSON upload streams to disk like a multipart one: memory does not grow with its size.

A 150 MB `application/json` body to `POST /datasets/x/data` added 450 MiB to the server's
resident memory (the body, the parsed text and the copy written out; four at once 990 MiB),
where a multipart upload of the same bytes added nothing. The body is now spooled to disk and
each document's text decoded piece by piece into its file.

A real `cogmill serve` in a process of its own; its peak resident memory (VmHWM, reset just
before the upload through /proc/<pid>/clear_refs) is compared with its memory before.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.serve_support import cogmill_serve

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY_BYTES = 150 * 1024 * 1024
ADDED_RSS_BOUND = 50 * 1024 * 1024
LINE = 'Ada Lovelace wrote the first program for Babbage\'s engine; "notes" \\ G é 中.\n'


def write_body(path: Path) -> int:
    """A JSON upload of one document whose text is about BODY_BYTES (escapes and non-ASCII
    included); the bytes of its text once decoded."""
    encoded = json.dumps(LINE)[1:-1].encode()
    lines = BODY_BYTES // len(encoded)
    with path.open("wb") as out:
        out.write(b'{"documents": [{"name": "big.txt", "text": "')
        block = encoded * 1000
        for _ in range(lines // 1000):
            out.write(block)
        out.write(b'"}]}')
    return (lines // 1000) * 1000 * len(LINE.encode())


def server_pid(base_url: str) -> int:
    """The pid of this process's child serving `base_url`."""
    port = base_url.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"serve" in command and port.encode() in command:
            return int(entry.name)
    raise AssertionError(f"no child process serves {base_url}")


def memory_kib(pid: int, field: str) -> int:
    """A field of /proc/<pid>/status in KiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            yield block


def test_a_150_mb_json_upload_adds_under_50_mib_of_memory(tmp_path: Path) -> None:
    body = tmp_path / "body.json"
    text_bytes = write_body(body)
    home = tmp_path / "home"
    home.mkdir()
    with cogmill_serve(home, {}) as base_url:
        pid = server_pid(base_url)
        with httpx.Client(base_url=base_url, timeout=600) as client:
            first = {"documents": [{"name": "small.txt", "text": "A first document."}]}
            warm = client.post("/api/v1/datasets/x/data", json=first)
            assert warm.status_code == 200, warm.text
            before = memory_kib(pid, "VmRSS")
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
            started = time.perf_counter()
            answer = client.post(
                "/api/v1/datasets/x/data",
                content=chunks(body),
                headers={"Content-Type": "application/json"},
            )
            seconds = time.perf_counter() - started
            peak = memory_kib(pid, "VmHWM")
            listed = client.get("/api/v1/datasets/x/data").json()
    added = (peak - before) * 1024
    print(
        f"\n{body.stat().st_size / 2**20:.0f} MiB JSON upload: answered in {seconds:.1f} s, "
        f"peak RSS {added / 2**20:+.1f} MiB over {before / 1024:.0f} MiB"
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["added"] == ["big.txt"]
    assert added <= ADDED_RSS_BOUND
    sizes = {doc["name"]: doc["size"] for doc in listed}
    assert sizes["big.txt"] == text_bytes, sizes  # the whole text, decoded, was stored
