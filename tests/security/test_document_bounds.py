"""Per-document bounds: a document over one fails alone, with an error naming the setting.

A 20,000-page PDF and an xlsx of 2 million cells were small files that held a worker for
minutes and gigabytes. Each bound is exceeded here through the classify step as a worker
runs it (the structural parsers in their child process), beside a document within bounds
that is still read.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from core.stores.blob_fs import FileBlobStore
from pipelines.classify import Classify
from pipelines.formats.base import DocumentProblem, Limits
from pipelines.formats.office import _check_cells
from pipelines.models import ClassifiedBatch, DocumentBatch, DocumentRef
from tests import sample_files as sf

pytestmark = pytest.mark.unit


def classify(tmp_path: Path, files: dict[str, bytes], **limits: int) -> ClassifiedBatch:
    blobs = FileBlobStore(tmp_path / "blobs")
    refs = []
    for name, data in files.items():
        size = blobs.put(f"ds/{name}", io.BytesIO(data))
        refs.append(DocumentRef(id=name, dataset="ds", name=name, blob_key=f"ds/{name}", size=size))
    step = Classify(blobs, max_bytes=1 << 24, limits=Limits(**limits), parse_timeout_s=120)
    return step.run(DocumentBatch(dataset="ds", documents=refs))


def refused(batch: ClassifiedBatch) -> dict[str, str]:
    return {error.document_name: error.message for error in batch.errors}


def read(batch: ClassifiedBatch) -> set[str]:
    return {document.document.name for document in batch.documents}


def test_a_pdf_over_the_page_limit_fails_alone(tmp_path: Path) -> None:
    pages = [[f"Page {i} tells of the river."] for i in range(3)]
    files = {"long.pdf": sf.pdf_bytes(pages), "short.pdf": sf.pdf_bytes(pages[:2])}
    batch = classify(tmp_path, files, max_pages=2)
    assert read(batch) == {"short.pdf"}
    message = refused(batch)["long.pdf"]
    assert "3 pages" in message and "COGMILL_MAX_DOCUMENT_PAGES" in message, message


@pytest.mark.slow
def test_a_workbook_over_the_cell_limit_fails_before_it_is_parsed(tmp_path: Path) -> None:
    files = {"big.xlsx": sf.xlsx_bytes(rows=30), "small.xlsx": sf.xlsx_bytes(rows=2)}
    batch = classify(tmp_path, files, max_cells=50)
    assert read(batch) == {"small.xlsx"}
    message = refused(batch)["big.xlsx"]
    assert "more than 50 cells" in message and "COGMILL_MAX_DOCUMENT_CELLS" in message, message


@pytest.mark.slow
def test_cells_are_counted_exactly_across_read_chunks() -> None:
    # People: a header and Ann (3 cells each), 39,999 people of 2 cells; Cities: 4 cells. The
    # sheet's XML is several MiB, so cells straddle the 1 MiB reads.
    book = sf.xlsx_bytes(rows=40_000)
    cells = 3 + 3 + 39_999 * 2 + 4
    _check_cells(io.BytesIO(book), cells)
    with pytest.raises(DocumentProblem, match=f"more than {cells - 1} cells"):
        _check_cells(io.BytesIO(book), cells - 1)


def test_a_text_over_the_character_limit_fails_alone(tmp_path: Path) -> None:
    files = {"long.txt": b"word " * 100, "short.txt": b"word " * 10, "note.md": b"# Hi\n\nword"}
    batch = classify(tmp_path, files, max_chars=100)
    assert read(batch) == {"short.txt", "note.md"}
    message = refused(batch)["long.txt"]
    assert "over the limit of 100" in message and "COGMILL_MAX_DOCUMENT_CHARS" in message, message


@pytest.mark.slow
def test_a_parse_over_its_time_limit_fails_alone(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    files = {"slow.eml": sf.slow_eml_bytes(400_000), "ok.eml": sf.eml_bytes()}
    refs = []
    for name, data in files.items():
        size = blobs.put(f"ds/{name}", io.BytesIO(data))
        refs.append(DocumentRef(id=name, dataset="ds", name=name, blob_key=f"ds/{name}", size=size))
    step = Classify(blobs, max_bytes=1 << 24, parse_timeout_s=3)
    batch = step.run(DocumentBatch(dataset="ds", documents=refs))
    assert read(batch) == {"ok.eml"}
    message = refused(batch)["slow.eml"]
    assert "longer than 3 s" in message and "COGMILL_PARSE_TIMEOUT_SECONDS" in message, message
