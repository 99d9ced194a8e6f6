"""Large text documents through real Celery worker threads: planned as segments, processed as
one document (ids, counts, re-cognify, delete, a failing segment), in bounded memory."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from core.catalog import AddReport
from core.models.graph import Node, chunk_id
from core.models.jobs import Job, JobStatus
from core.models.vocabulary import INDEX_FIELDS
from pipelines.classify import check_supported
from pipelines.formats.segments import segment_count
from runtime import Runtime
from tests.backends import (
    embedded_only,
    finished,
)
from workers.orchestration import cognify

ROOT = Path(__file__).resolve().parents[2]
SEGMENT_BYTES = 16 * 1024
WORDS = [
    "river",
    "city",
    "council",
    "bridge",
    "harbour",
    "museum",
    "Alice",
    "Berlin",
    "Porto",
    "Acme",
    "opened",
    "visited",
]


def prose(seed: int, size: int) -> str:
    """About `size` characters of sentences in blank-line separated paragraphs."""
    rng = random.Random(seed)
    out: list[str] = []
    used = 0
    while used < size:
        paragraph = " ".join(
            " ".join(rng.choices(WORDS, k=rng.randint(5, 12))).capitalize() + "."
            for _ in range(rng.randint(2, 6))
        )
        out.append(paragraph)
        used += len(paragraph) + 2
    return "\n\n".join(out) + "\n"


@pytest.fixture
def segment_bytes() -> int:
    return SEGMENT_BYTES


@pytest.fixture
def runtime_settings(segment_bytes: int) -> dict[str, object]:
    return {"segment_bytes": segment_bytes, "chunk_tokens": 128}


def add(rt: Runtime, tmp_path: Path, name: str, data: bytes) -> Node:
    rt.catalog.ensure_dataset("big")
    path = tmp_path / name
    path.write_bytes(data)
    report = AddReport()
    rt.catalog.add_file("big", path, name, report, check_supported)
    assert report.added == [name], report
    return document(rt, name)


def document(rt: Runtime, name: str) -> Node:
    (doc,) = rt.graph.find_nodes("big", "Document", name=name)
    return doc


def run(rt: Runtime, mode: str = "changed") -> Job:
    return finished(rt, cognify(rt, "big", None, mode), 240)


def snapshot(rt: Runtime) -> dict[str, int]:
    counts = rt.graph.count("big")
    for node_type, fields in INDEX_FIELDS.items():
        for field in fields:
            name = f"{node_type}_{field}"
            counts[f"vectors:{name}"] = rt.vectors.count(name, dataset="big")
    return counts


@pytest.mark.slow
@embedded_only  # what is tested is the parsing; the stores are the embedded ones
@pytest.mark.parametrize("segment_bytes", [4096])  # the least allowed: six segments cost little
def test_a_large_document_is_one_document_made_of_segments(
    runtime: Runtime, tmp_path: Path, segment_bytes: int
) -> None:
    doc = add(runtime, tmp_path, "long.txt", prose(1, 6 * segment_bytes).encode())
    segments = segment_count(doc.properties["size"], segment_bytes)
    assert segments >= 6
    job = run(runtime)
    assert job.status is JobStatus.SUCCEEDED and not job.errors, job.errors
    assert job.total_documents == 1 and job.counts["documents"] == 1
    assert job.total_batches == segments
    assert document(runtime, "long.txt").properties["status"] == "processed"
    chunks = runtime.graph.find_nodes("big", "DocumentChunk", limit=100_000)
    assert len(chunks) == job.counts["chunks"] > 2 * segments
    indexes = sorted(int(c.properties["index"]) for c in chunks)
    assert len(set(indexes)) == len(indexes) and indexes[0] == 0
    assert {c.id for c in chunks} == {chunk_id(doc.id, i) for i in indexes}
    summaries = runtime.graph.find_nodes("big", "TextSummary", limit=100_000)
    scopes = sorted(s.properties.get("scope") for s in summaries if s.properties.get("scope"))
    # One summary of the document (its first segment), one of each later segment with text.
    assert scopes.count("document") == 1
    assert segments - 2 <= scopes.count("segment") <= segments - 1

    stored = snapshot(runtime)
    assert run(runtime).total_batches == 0  # unchanged: nothing to do
    again = run(runtime, "all")  # the first segment purges, once; the others add to it
    assert again.status is JobStatus.SUCCEEDED and again.counts["chunks"] == len(chunks)
    assert snapshot(runtime) == stored

    runtime.catalog.remove_named("big", "long.txt")
    left = snapshot(runtime)
    assert not left.get("DocumentChunk") and not left.get("TextSummary"), left
    assert not any(n for k, n in left.items() if k.startswith("vectors:")), sorted(left.items())


def junk(size: int) -> bytes:
    """Bytes no candidate encoding reads as text (control bytes throughout)."""
    rng = random.Random(7)
    return bytes(rng.choice([1, 2, 3, 200, 201, 250]) for _ in range(size))


@pytest.mark.slow
@embedded_only
@pytest.mark.parametrize("where", ["first", "middle"])
def test_a_failing_segment_fails_its_document_and_nothing_else(
    runtime: Runtime, tmp_path: Path, where: str
) -> None:
    text = prose(2, 5 * SEGMENT_BYTES)
    cut = SEGMENT_BYTES // 2 if where == "first" else len(text) // 2  # past the head `add` reads
    data = text[:cut].encode() + b"\n\n" + junk(500) + b"\n\n" + text[cut:].encode()
    add(runtime, tmp_path, "broken.txt", data)
    add(runtime, tmp_path, "fine.txt", prose(3, 2000).encode())
    job = run(runtime)
    assert job.status is JobStatus.SUCCEEDED, job  # one of two documents failed
    assert job.total_documents == 2 and job.counts["documents"] == 1, (job.counts, job.errors)
    assert {e.document_name for e in job.errors} == {"broken.txt"}
    assert all("segment" in e.message and "undecodable" in e.message for e in job.errors)
    broken = document(runtime, "broken.txt")
    assert broken.properties["status"] == "failed", broken.properties
    assert document(runtime, "fine.txt").properties["status"] == "processed"
    assert len(job.errors) == 1  # one segment failed; the others did not report it again
    chunks = runtime.graph.find_nodes("big", "DocumentChunk", limit=100_000)
    written = {c.properties["document_id"] for c in chunks}
    if where == "first":  # the other segments were not run at all
        assert written == {document(runtime, "fine.txt").id}
    else:  # the other segments were written, yet the document is failed, not processed
        assert broken.id in written
    # The failed document is planned again, all its segments.
    retry = cognify(runtime, "big", None, "changed")
    assert retry.total_documents == 1
    assert retry.total_batches == segment_count(len(data), SEGMENT_BYTES)


def peak_growth(*megabytes: float) -> list[dict[str, object]]:
    """bench/large_file.py in a child process per size, run at once (each measures its own
    peak RSS): the peak RSS of classify and chunk."""
    command = [sys.executable, str(ROOT / "bench" / "large_file.py"), "--mb"]
    runs = [
        subprocess.Popen([*command, str(mb)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        for mb in megabytes
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0] * len(runs), outputs
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


@pytest.mark.slow  # two processes classify and chunk 30 MB
def test_classify_and_chunk_memory_does_not_grow_with_the_file() -> None:
    """A 24 MB file needs no more memory than a 6 MB one (before segments: ~5x the file)."""
    small, large = peak_growth(6, 24)
    for step in ("classify", "chunk"):
        small_peak = small["peak_above_baseline_mib"][step]  # type: ignore[index]
        large_peak = large["peak_above_baseline_mib"][step]  # type: ignore[index]
        assert large_peak < 100, large
        assert large_peak < small_peak + 25, (small, large)
