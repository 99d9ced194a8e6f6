"""Every document format from real generated files, streaming in bounded blocks, and the
format-specific refusals (zip bombs, encrypted/truncated/textless PDFs, bad encodings)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import BinaryIO

import pytest
from pdfminer.layout import LTTextBox

from core.stores.blob_fs import FileBlobStore
from pipelines import chunk as chunk_module
from pipelines.chunk import ChunkDocuments
from pipelines.classify import SUPPORTED_EXTENSIONS, Classify, check_supported
from pipelines.formats.base import Limits
from pipelines.formats.code import split_blocks
from pipelines.formats.pdf import MAX_GROUPED_BOXES, _pages
from pipelines.models import ClassifiedBatch, ClassifiedDocument, DocumentBatch, DocumentRef
from tests import sample_files as sf


class RecordingBlobs(FileBlobStore):
    """A file blob store that records the size of every read on the streams it opens."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[int] = []

    def open(self, key: str) -> BinaryIO:
        stream = super().open(key)
        reads, read = self.reads, stream.read

        def recorded(size: int = -1) -> bytes:
            reads.append(size)
            return read(size)

        stream.read = recorded  # type: ignore[method-assign]
        return stream


@pytest.fixture
def blobs(tmp_path: Path) -> RecordingBlobs:
    return RecordingBlobs(tmp_path / "blobs")


def classify(
    blobs: FileBlobStore, files: dict[str, bytes], **limits: int
) -> tuple[dict[str, ClassifiedDocument], dict[str, str]]:
    """Classify the files; returns (documents by name, error messages by name)."""
    refs = []
    for name, data in files.items():
        size = blobs.put(f"ds/{name}", io.BytesIO(data))
        refs.append(
            DocumentRef(id=f"id-{name}", dataset="ds", name=name, blob_key=f"ds/{name}", size=size)
        )
    max_bytes = limits.pop("max_bytes", 1 << 26)
    step = Classify(blobs, max_bytes=max_bytes, limits=Limits(**limits))
    batch = step.run(DocumentBatch(dataset="ds", documents=refs))
    docs = {doc.document.name: doc for doc in batch.documents}
    return docs, {error.document_name: error.message for error in batch.errors}


def texts(doc: ClassifiedDocument) -> list[tuple[str, str]]:
    return [(e.kind, e.text) for e in doc.elements]


@pytest.fixture(scope="module")
def office_docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ClassifiedDocument]:
    blobs = FileBlobStore(tmp_path_factory.mktemp("office"))
    files = {"r.docx": sf.docx_bytes(), "s.pptx": sf.pptx_bytes(), "b.xlsx": sf.xlsx_bytes()}
    docs, errors = classify(blobs, files)
    assert errors == {}
    return docs


def test_docx_keeps_headings_lists_and_table_rows(office_docs: dict) -> None:
    assert office_docs["r.docx"].kind == "docx"
    assert texts(office_docs["r.docx"]) == [
        ("title", "Quarterly report"),
        ("text", sf.DOCX_PARAGRAPH),
        ("list", "- hire two engineers\n- open an office"),
        ("table", "Region: North, Revenue: 120\nRegion: South, Revenue: 95"),
    ]


def test_pptx_gives_slide_titles_text_and_tables(office_docs: dict) -> None:
    assert texts(office_docs["s.pptx"]) == [
        ("title", "Roadmap"),
        ("text", "Ship the graph engine"),
        ("text", "Hire a designer"),
        ("title", "Numbers"),
        ("table", "City: Paris, Population: 2.1M\nCity: Rome, Population: 2.8M"),
    ]


def test_xlsx_gives_each_sheet_with_named_columns(office_docs: dict) -> None:
    assert texts(office_docs["b.xlsx"]) == [
        ("title", "Sheet: People"),
        ("table", "name: Ann, age: 31, city: Oslo\nname: Person 1, city: Rome"),
        ("title", "Sheet: Cities"),
        ("table", "city: Oslo, country: Norway"),
    ]


def test_large_sheet_is_grouped_into_table_elements_of_whole_rows(blobs: RecordingBlobs) -> None:
    docs, _ = classify(blobs, {"big.xlsx": sf.xlsx_bytes(rows=45)})
    tables = [e.text for e in docs["big.xlsx"].elements if e.kind == "table"]
    assert [len(t.split("\n")) for t in tables] == [20, 20, 5, 1]
    assert tables[1].split("\n")[0] == "name: Person 20, city: Rome"


def test_pdf_text_boxes_become_paragraphs_across_pages(blobs: RecordingBlobs) -> None:
    pages = [["Marie Curie was born in Warsaw.", "She won two Nobel prizes."], ["Page two."]]
    docs, errors = classify(blobs, {"c.pdf": sf.pdf_bytes(pages)})
    assert errors == {}
    assert texts(docs["c.pdf"]) == [("text", p) for page in pages for p in page]


@pytest.mark.slow
def test_a_crowded_pdf_page_is_laid_out_in_time_and_whole(blobs: RecordingBlobs) -> None:
    """pdfminer joins a page's neighbouring lines in time that grows faster than their square
    where they crowd: 32,000 scattered words (1.3 MB) ran past 10 minutes. Above
    MAX_GROUPED_LINES each line is a box of its own."""
    words = 32_000
    started = time.process_time()
    docs, errors = classify(blobs, {"crowded.pdf": sf.scattered_words_pdf(words)})
    took = time.process_time() - started
    assert errors == {}
    assert sum(e.text.count("w") for e in docs["crowded.pdf"].elements) == words  # none lost
    assert took < 60  # measured: 5.4 CPU-s


def test_a_page_of_many_boxes_is_ordered_not_grouped_pairwise() -> None:
    """pdfminer's pairwise grouping of a page's text boxes grows with their cube (2,000
    scattered words, 80 KB, took 109 CPU-s). Above MAX_GROUPED_BOXES the boxes are one flat
    group ordered by pdfminer's reading-order key; below it the grouping is pdfminer's own."""
    many = next(_pages(io.BytesIO(sf.scattered_words_pdf(450))))
    few = next(_pages(io.BytesIO(sf.pdf_bytes([["One.", "Two.", "Three.", "Four."]]))))
    boxes = [obj for obj in many if isinstance(obj, LTTextBox)]
    assert len(boxes) > MAX_GROUPED_BOXES and len(many.groups) == 1
    assert list(many.groups[0]) == boxes  # flat, and the page's order is the group's
    assert len(few.groups) == 1 and not all(isinstance(g, LTTextBox) for g in few.groups[0])


def test_eml_has_headers_body_and_attachment_names(blobs: RecordingBlobs) -> None:
    files = {
        "plain.eml": sf.eml_bytes(),
        "html.eml": sf.eml_bytes(body=None, html="<p>Hello <b>Bob</b></p>", attachment=False),
    }
    docs, errors = classify(blobs, files)
    assert errors == {}
    plain = texts(docs["plain.eml"])
    assert plain[0] == (
        "text",
        "Subject: Release plan\nFrom: Ann Lee <ann@example.com>\nTo: bob@example.com\n"
        "Date: Tue, 04 Mar 2025 10:00:00 +0000",
    )
    assert ("text", "The graph engine ships on Friday.") in plain
    assert plain[-1] == ("list", "Attachments:\n- plan.pdf")
    assert texts(docs["html.eml"])[1:] == [("text", "Hello Bob")]


def test_python_is_split_into_top_level_units_with_decorators_and_comments(
    blobs: RecordingBlobs,
) -> None:
    docs, _ = classify(blobs, {"graph.py": sf.PYTHON_SOURCE.encode()})
    units = [text for kind, text in texts(docs["graph.py"]) if kind == "code"]
    assert docs["graph.py"].kind == "python"
    assert [unit.split("\n")[0] for unit in units] == [
        '"""Tiny graph helpers."""',
        "@dataclass",
        "# Distance between two points, used by layout.",
    ]
    assert units[0].endswith("SCALE = 2")  # imports and constants stay together
    assert "    def label(self) -> str:" in units[1]  # indentation is kept
    assert units[2].endswith("return math.hypot(dx, dy) * SCALE")


def test_other_languages_split_on_layout(blobs: RecordingBlobs) -> None:
    docs, _ = classify(
        blobs, {"app.js": sf.JS_SOURCE.encode(), "bad.py": b"def f(:\n  x\n\ny = 1\n"}
    )
    units = [text for _, text in texts(docs["app.js"])]
    assert [unit.split("\n")[0] for unit in units] == [
        'import { readFile } from "fs";',
        "const LIMIT = 10;",
        "function parse(text) {",
        "class Store {",
    ]
    assert units[2].endswith("}") and "\n\n  return rows" in units[2]
    # Python that does not parse is still ingested, split by layout.
    assert [text for _, text in texts(docs["bad.py"])] == ["def f(:\n  x", "y = 1"]


def test_split_blocks_cuts_a_class_into_its_methods() -> None:
    source = (
        "class A:\n    x = 1\n\n    def a(self):\n        pass\n    def b(self):\n        pass\n"
    )
    assert split_blocks(source) == [
        "class A:\n    x = 1\n",
        "    def a(self):\n        pass",
        "    def b(self):\n        pass\n",
    ]


def test_oversize_code_is_chunked_on_method_boundaries() -> None:
    methods = [
        f"    def method_{i}(self, value):\n"
        + "".join(f"        value = value + {j}  # step {j}\n" for j in range(6))
        + "        return value\n"
        for i in range(8)
    ]
    source = "class Big:\n    '''Many methods.'''\n\n" + "\n".join(methods)
    ref = DocumentRef(id="d", dataset="ds", name="big.py", blob_key="k")
    doc = ClassifiedDocument(
        document=ref, kind="python", elements=[{"kind": "code", "text": source}]
    )
    out = ChunkDocuments(max_tokens=200).run(ClassifiedBatch(dataset="ds", documents=[doc]))
    assert len(out.chunks) > 2
    for chunk in out.chunks:
        # Every chunk is whole methods: it starts at a definition (or the class) and each
        # method in it ends with its return.
        assert chunk.text.lstrip().startswith(("class Big", "def method_")), chunk.text
        assert chunk.text.count("def method_") == chunk.text.count("return value")
        assert "\n        value = value + 1" in chunk.text  # indentation kept
    assert sum(c.text.count("def method_") for c in out.chunks) == 8


def test_text_is_read_in_bounded_blocks_and_split_correctly_across_them(
    blobs: RecordingBlobs,
) -> None:
    paragraph = "The graph engine streams text. " * 20
    body = "\r\n\r\n".join(f"{i}: {paragraph.strip()}" for i in range(400))
    data = body.encode()
    docs, errors = classify(blobs, {"big.txt": data}, block_bytes=4096)
    assert errors == {}
    assert texts(docs["big.txt"]) == [
        ("text", f"{i}: {paragraph.strip()}") for i in range(400)
    ]  # paragraphs and \r\n pairs cut by block edges come out whole
    assert len(data) > 60 * 4096
    assert max(blobs.reads) == 4096 and -1 not in blobs.reads


def test_csv_and_jsonl_stream_with_quoted_newlines_across_blocks(blobs: RecordingBlobs) -> None:
    rows = "".join(f'{i},"line one\nline two {i}"\n' for i in range(300))
    lines = "".join(f'{{"n": {i}, "note": "a\\u2028b"}}\n' for i in range(300))
    files = {"t.csv": f"id,note\n{rows}".encode(), "l.jsonl": lines.encode()}
    docs, errors = classify(blobs, files, block_bytes=1024)
    assert errors == {}
    csv_rows = [row for e in docs["t.csv"].elements for row in e.text.split("\n")]
    assert len(csv_rows) == 600 and csv_rows[2:4] == ["id: 1, note: line one", "line two 1"]
    assert len(docs["l.jsonl"].elements) == 300
    assert max(blobs.reads) == 1024


def test_utf8_with_a_late_cp1252_byte_is_decoded_as_cp1252(blobs: RecordingBlobs) -> None:
    data = b"plain ascii words. " * 500 + "Caf\u00e9 \u2014 d\u00e9j\u00e0 vu.".encode("cp1252")
    docs, errors = classify(blobs, {"late.txt": data}, block_bytes=1024)
    assert errors == {}
    assert docs["late.txt"].elements[-1].text.endswith("Café — déjà vu.")


def test_utf16_without_bom_is_recognised() -> None:
    assert check_supported("w.txt", "Hello wide world".encode("utf-16-le")) is None


def test_undecodable_text_says_which_encodings_were_tried(blobs: RecordingBlobs) -> None:
    # Valid UTF-8 first, then bytes that are neither UTF-8 nor text in any 8-bit encoding.
    data = b"hello " * 300 + bytes(range(0x80, 0xA0)) * 40
    _, errors = classify(blobs, {"mixed.txt": data}, block_bytes=1024)
    message = errors["mixed.txt"]
    assert "utf-8 (invalid byte at offset 1800)" in message
    for tried in ("UTF-16", "cp1252", "latin-1", "UTF-8"):
        assert tried in message, message


def test_zip_bomb_limits_are_configurable(blobs: RecordingBlobs) -> None:
    bomb = sf.docx_bytes({"word/media/zeros.bin": bytes(8 << 20)})
    files = {"ratio.docx": bomb, "plain.docx": sf.docx_bytes()}
    _, errors = classify(blobs, files)
    assert set(errors) == {"ratio.docx"}
    assert "zip bomb" in errors["ratio.docx"] and "word/media/zeros.bin" in errors["ratio.docx"]
    _, errors = classify(blobs, {"total.docx": sf.docx_bytes()}, max_unpacked_bytes=10_000)
    assert (
        "unpacks to" in errors["total.docx"] and "above the limit of 10000" in errors["total.docx"]
    )
    _, errors = classify(blobs, {"ok.docx": bomb}, max_compression_ratio=5000)
    assert errors == {}


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("report.pdf", b"%PDF-1.7\n", None),
        ("report.docx", b"PK\x03\x04", None),
        ("mail.eml", b"Subject: hi\n", None),
        ("main.rs", b"fn main() {}", None),
        ("photo.pdf", b"\x89PNG\r\n\x1a\n", "not a valid PDF: it is a PNG image"),
        ("sheet.xlsx", b"name,age\nAnn,31\n", "it looks like CSV: rename it .csv"),
        ("old.docx", b"\xd0\xcf\x11\xe0\xa1\xb1", "save it in the newer .docx format"),
        ("empty.pdf", b"", "empty"),
        ("junk.eml", b"\x7fELF\x02", "not an e-mail: it is an executable"),
    ],
)
def test_check_supported_knows_binary_formats(name: str, head: bytes, expected: str | None) -> None:
    message = check_supported(name, head)
    assert message == expected if expected is None else expected in (message or "")


def test_every_format_of_the_issue_is_supported() -> None:
    wanted = "txt md html pdf docx pptx xlsx eml csv tsv json jsonl py js ts go java c rs"
    assert {f".{ext}" for ext in wanted.split()} <= SUPPORTED_EXTENSIONS


def test_token_counting_in_groups_gives_the_same_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = DocumentRef(id="d", dataset="ds", name="d.txt", blob_key="k")
    elements = [{"kind": "text", "text": f"Paragraph {i} about graphs. " * 5} for i in range(50)]
    batch = ClassifiedBatch(
        dataset="ds", documents=[ClassifiedDocument(document=ref, kind="txt", elements=elements)]
    )
    whole = ChunkDocuments(max_tokens=64).run(batch)
    calls: list[int] = []
    count = chunk_module.count_tokens
    monkeypatch.setattr(chunk_module, "COUNT_GROUP_CHARS", 500)
    monkeypatch.setattr(chunk_module, "count_tokens", lambda t: calls.append(len(t)) or count(t))
    grouped = ChunkDocuments(max_tokens=64).run(batch)
    assert grouped == whole
    assert len(calls) > 10 and max(calls) <= 5
