"""Segments of large text documents: where they are cut, and what classify and chunk make of
them (the same paragraphs as the whole file, distinct and repeatable chunk ids)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from core.models.graph import chunk_id
from core.stores.blob_fs import FileBlobStore
from pipelines.chunk import ChunkDocuments
from pipelines.classify import Classify
from pipelines.definitions import get_pipeline
from pipelines.formats.segments import boundary, segment_count, segment_span
from pipelines.models import ChunkBatch, DocumentBatch, DocumentRef
from workers.orchestration import _groups, segments_of

WORDS = [
    "river",
    "city",
    "bridge",
    "harbour",
    "Alice",
    "Berlin",
    "opened",
    "visited",
    "müller",
    "café",
    "naïve",
]


def prose(seed: int, paragraphs: int, blank: str = "\n\n") -> str:
    """Paragraphs of sentences (some non-ASCII words), separated by `blank`."""
    rng = random.Random(seed)
    out = []
    for _ in range(paragraphs):
        lines = [
            " ".join(rng.choices(WORDS, k=rng.randint(4, 14))).capitalize() + "."
            for _ in range(rng.randint(1, 5))
        ]
        out.append("\n".join(lines))
    return blank.join(out) + "\n"


def spans(data: bytes, segment_bytes: int) -> list[range]:
    count = segment_count(len(data), segment_bytes)
    return [segment_span(io.BytesIO(data), k, count, segment_bytes) for k in range(count)]


@pytest.mark.parametrize("segment_bytes", [4096, 5000, 9999])
@pytest.mark.parametrize("blank", ["\n\n", "\r\n\r\n", "\n  \n"])
def test_segments_tile_the_file_and_are_cut_after_a_blank_line(
    segment_bytes: int, blank: str
) -> None:
    data = prose(1, 400, blank).encode()
    cuts = spans(data, segment_bytes)
    assert len(cuts) > 3
    assert cuts[0].start == 0 and cuts[-1].stop == len(data)
    for before, after in zip(cuts, cuts[1:], strict=False):
        assert before.stop == after.start and len(before) > 0
        assert data[: after.start].endswith(blank.encode())


def test_without_blank_lines_a_cut_falls_after_a_line_then_between_words() -> None:
    lines = prose(2, 300, "\n").encode()
    for cut in spans(lines, 4096)[1:]:
        assert lines[cut.start - 1 : cut.start] == b"\n"
    words = lines.replace(b"\n", b" ")
    for cut in spans(words, 4096)[1:]:
        assert words[cut.start - 1 : cut.start] == b" "  # never inside a word
        # and the segments decode on their own: no UTF-8 character is split
        words[cut.start : cut.stop].decode("utf-8")


def test_text_without_whitespace_is_never_cut_inside_a_character() -> None:
    data = ("é" * 10_000).encode()
    for offset in range(4000, 4010):
        cut = boundary(io.BytesIO(data), offset, len(data), 4096)
        assert offset <= cut <= offset + 1
        data[cut:].decode("utf-8")


def store(blobs: FileBlobStore, name: str, data: bytes) -> DocumentRef:
    blobs.put(f"ds/{name}", io.BytesIO(data))
    return DocumentRef(
        id=f"doc-{name}",
        dataset="ds",
        name=name,
        blob_key=f"ds/{name}",
        extension=Path(name).suffix,
        size=len(data),
    )


def classify_and_chunk(blobs: FileBlobStore, refs: list[DocumentRef]) -> ChunkBatch:
    """Each ref as its own batch (as planned), through classify and chunk, outputs joined."""
    out = ChunkBatch(dataset="ds")
    for ref in refs:
        classified = Classify(blobs, 1 << 30).run(DocumentBatch(dataset="ds", documents=[ref]))
        assert not classified.errors, classified.errors
        chunked = ChunkDocuments(max_tokens=64).run(classified)
        assert not chunked.errors, chunked.errors
        out.chunks += chunked.chunks
        out.documents += chunked.documents
    return out


def planned(ref: DocumentRef, segment_bytes: int) -> list[DocumentRef]:
    return segments_of(ref, get_pipeline("default"), segment_bytes)


def test_segments_give_the_whole_documents_paragraphs_with_distinct_repeatable_ids(
    tmp_path: Path,
) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    ref = store(blobs, "big.txt", prose(3, 600).encode())
    segments = planned(ref, 8192)
    assert len(segments) == segment_count(ref.size, 8192) > 5
    assert [s.segment for s in segments] == list(range(len(segments)))
    whole = Classify(blobs, 1 << 30).run(DocumentBatch(dataset="ds", documents=[ref]))
    parts = [
        Classify(blobs, 1 << 30).run(DocumentBatch(dataset="ds", documents=[s])) for s in segments
    ]
    joined = [e for part in parts for e in part.documents[0].elements]
    assert joined == whole.documents[0].elements  # cut between paragraphs only
    first = classify_and_chunk(blobs, segments)
    again = classify_and_chunk(blobs, segments)  # a re-run (a resumed step) makes the same
    assert [c.model_dump() for c in first.chunks] == [c.model_dump() for c in again.chunks]
    indexes = [c.index for c in first.chunks]
    assert indexes == sorted(set(indexes))  # distinct, in document order
    assert all(c.id == chunk_id(ref.id, c.index) for c in first.chunks)
    # The first segment's chunks are numbered as an uncut document's are.
    assert indexes[:3] == [0, 1, 2]
    unsegmented = ChunkDocuments(max_tokens=64).run(whole)
    assert [c.text for c in first.chunks][:3] == [c.text for c in unsegmented.chunks][:3]


def test_only_large_text_and_markdown_documents_are_segmented(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    big = store(blobs, "big.txt", prose(4, 300).encode())
    assert len(planned(big, 4096)) > 1
    assert planned(big, big.size) == [big]  # at the limit: whole
    assert len(planned(big.model_copy(update={"name": "b.md", "extension": ".md"}), 4096)) > 1
    for name in ("b.pdf", "b.csv", "b.py", "b.unknown"):
        other = big.model_copy(update={"name": name, "extension": Path(name).suffix})
        assert planned(other, 4096) == [other]
    structured = segments_of(big, get_pipeline("structured"), 4096)
    assert structured == [big]
    # Only the first segment purges what earlier runs derived; the rest must not.
    assert [s.derived for s in planned(big, 4096)][:2] == [True, False]


def test_each_segment_is_a_batch_and_small_documents_share_batches_by_count_and_bytes() -> None:
    def ref(name: str, size: int, segment: int = 0, segments: int = 1) -> DocumentRef:
        return DocumentRef(
            id=name,
            dataset="ds",
            name=name,
            blob_key=name,
            size=size,
            segment=segment,
            segments=segments,
        )

    refs = [ref("a", 10), ref("b", 10), ref("s", 100, 0, 2), ref("s", 100, 1, 2), ref("c", 10)]
    refs += [ref("d", 60), ref("e", 60), ref("f", 10), ref("g", 10), ref("h", 10)]
    names = [[r.name for r in group] for group in _groups(refs, size=3, max_bytes=100)]
    assert names == [["a", "b"], ["s"], ["s"], ["c", "d"], ["e", "f", "g"], ["h"]]


def test_a_blank_segment_is_no_error_and_an_html_page_is_read_whole_by_its_first_segment(
    tmp_path: Path,
) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    ref = store(blobs, "gap.txt", (prose(5, 20) + "\n" * 20_000 + prose(6, 20)).encode())
    segments = planned(ref, 4096)
    out = classify_and_chunk(blobs, segments)
    assert len(out.documents) == len(segments) and out.chunks
    page = "<!DOCTYPE html><html><body>" + "<p>Alice visited Berlin.</p>\n" * 500 + "</body></html>"
    html = store(blobs, "page.txt", page.encode())
    pieces = planned(html, 4096)
    assert len(pieces) > 1
    out = classify_and_chunk(blobs, pieces)
    assert {c.index for c in out.chunks} == set(range(len(out.chunks)))
    assert sum(c.text.count("Alice visited Berlin.") for c in out.chunks) == 500


def test_held_batches_wait_for_their_release_even_for_the_sweeper(tmp_path: Path) -> None:
    from core.models.jobs import Job
    from core.stores.sqlite.state import SQLiteStateStore
    from workers.jobs import JobTracker

    jobs = JobTracker(SQLiteStateStore(tmp_path / "state.db"))
    job = Job(id="j1", dataset="ds", pipeline="default", pipeline_version="2", total_batches=4)
    jobs.save(job)
    jobs.hold(job.id, [2, 3])
    assert jobs.unfinished_batches(job) == [0, 1]  # nothing may start a held batch
    assert jobs.release(job.id, 2) and not jobs.release(job.id, 2)  # released once only
    assert jobs.unfinished_batches(job) == [0, 1, 2]


def test_markdown_segments_give_the_whole_documents_elements(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    text = "".join(
        f"# Part {i}\n\nThe river {i} runs.\nIt is long.\n\n- one\n- two\n\n```\nx = {i}\n```\n\n"
        for i in range(300)
    )
    ref = store(blobs, "notes.md", text.encode())
    segments = planned(ref, 4096)
    assert len(segments) > 4

    def elements(refs: list[DocumentRef]) -> list[object]:
        batches = [
            Classify(blobs, 1 << 30).run(DocumentBatch(dataset="ds", documents=[r])) for r in refs
        ]
        return [e for batch in batches for e in batch.documents[0].elements]

    assert elements(segments) == elements([ref])
