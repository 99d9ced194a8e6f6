"""Structural parsers run in child processes with a deadline (pipelines/formats/isolated.py):
a document that takes too long, or a parser that dies, fails only its own document."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from core.stores.blob_fs import FileBlobStore
from pipelines.classify import Classify
from pipelines.formats.isolated import PARSERS
from pipelines.models import ClassifiedBatch, DocumentBatch, DocumentRef
from tests import sample_files as sf

SLOW = sf.slow_eml_bytes(400_000)  # ~29 CPU-s in the worker's own thread
GOOD = {"ok.eml": sf.eml_bytes(), "paper.pdf": sf.pdf_bytes(), "notes.txt": b"Plain words."}


def refs(blobs: FileBlobStore, files: dict[str, bytes]) -> list[DocumentRef]:
    out = []
    for name, data in files.items():
        path = blobs.root / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        with path.open("rb") as stream:
            size = blobs.put(f"ds/{name}", stream)
        out.append(DocumentRef(id=name, dataset="ds", name=name, blob_key=f"ds/{name}", size=size))
    return out


def classify(
    blobs: FileBlobStore, documents: list[DocumentRef], timeout_s: float
) -> ClassifiedBatch:
    step = Classify(blobs, max_bytes=1 << 20, parse_timeout_s=timeout_s)
    return step.run(DocumentBatch(dataset="ds", documents=documents))


def children(pid: int) -> dict[int, str]:
    """Processes whose parent is `pid`, with their state (R, S, Z, ...)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            found[int(stat.parent.name)] = fields[0]
    return found


def state(pid: int) -> str | None:
    """A process's state letter; None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def parsers_of(pid: int) -> set[int]:
    return {
        child
        for child in children(pid)
        if b"pipelines.formats.isolated" in Path(f"/proc/{child}/cmdline").read_bytes()
    }


def wait_for(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def blobs(tmp_path: Path) -> FileBlobStore:
    return FileBlobStore(tmp_path / "blobs")


@pytest.mark.slow  # waits out a 2 s deadline
def test_a_document_past_its_deadline_is_stopped_and_the_rest_of_the_batch_parsed(
    blobs: FileBlobStore,
) -> None:
    started = time.monotonic()
    batch = classify(blobs, refs(blobs, {"slow.eml": SLOW} | GOOD), timeout_s=2)
    took = time.monotonic() - started

    [error] = batch.errors
    assert error.document_name == "slow.eml"
    assert "took longer than 2 s and was stopped" in error.message
    assert "COGMILL_PARSE_TIMEOUT_SECONDS" in error.message
    parsed = {doc.document.name: " ".join(e.text for e in doc.elements) for doc in batch.documents}
    assert set(parsed) == set(GOOD)
    assert "ships on Friday" in parsed["ok.eml"] and "born in Warsaw" in parsed["paper.pdf"]
    assert took < 15, took  # 2 s, plus starting two parser processes
    # The stopped parser is gone (reaped, not a zombie); only idle ones are left.
    live = parsers_of(os.getpid())
    assert live == {child.proc.pid for child in PARSERS._idle}
    assert all(state != "Z" for state in children(os.getpid()).values())


@pytest.mark.slow  # lets the parser work 1 s into the document
def test_a_parser_that_dies_fails_its_document_and_is_replaced(blobs: FileBlobStore) -> None:
    PARSERS.close()
    slow = refs(blobs, {"slow.eml": SLOW})
    result: list[ClassifiedBatch] = []
    worker = threading.Thread(target=lambda: result.append(classify(blobs, slow, timeout_s=600)))
    worker.start()
    assert wait_for(lambda: len(parsers_of(os.getpid())) == 1, 30)
    [busy] = parsers_of(os.getpid())
    time.sleep(1)  # into the document
    os.kill(busy, signal.SIGKILL)
    worker.join(30)

    [error] = result[0].errors
    assert "ended abnormally (exit code -9" in error.message, error.message
    ok = refs(blobs, {"ok.eml": GOOD["ok.eml"]})
    batch = classify(blobs, ok, timeout_s=600)
    assert batch.errors == [] and batch.documents[0].elements
    assert busy not in parsers_of(os.getpid())

    # One that dies while idle is not the next document's problem.
    [idle] = parsers_of(os.getpid())
    os.kill(idle, signal.SIGKILL)
    assert wait_for(lambda: state(idle) in (None, "Z"), 10)
    batch = classify(blobs, ok, timeout_s=600)
    assert batch.errors == [] and batch.documents[0].elements
    assert idle not in parsers_of(os.getpid())


@pytest.mark.slow  # a worker process, 1 s into the document
def test_a_parser_ends_when_its_worker_is_killed(tmp_path: Path) -> None:
    """A worker killed mid-document leaves no parser running on for hours."""
    path = tmp_path / "slow.eml"
    path.write_bytes(SLOW)
    script = f"""
import functools
from pipelines.formats.base import Source
from pipelines.formats.isolated import PARSERS
from pipelines.formats.mail import partition_eml
source = Source(name="slow.eml", open=functools.partial(open, {str(path)!r}, "rb"))
PARSERS.partition(partition_eml, "eml", source, 600)
"""
    worker = subprocess.Popen([sys.executable, "-c", script])
    try:
        assert wait_for(lambda: len(parsers_of(worker.pid)) == 1, 30)
        [parser] = parsers_of(worker.pid)
        time.sleep(1)  # into the document
        worker.kill()
        worker.wait()
        assert wait_for(lambda: state(parser) in (None, "Z"), 10), f"parser {parser} runs on"
    finally:
        worker.kill()
