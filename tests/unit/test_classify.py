"""Classify: real sample files of every supported kind, and every way a file can be refused."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from core.stores.blob_fs import FileBlobStore
from pipelines.classify import (
    SPACY_MODEL,
    SUPPORTED_EXTENSIONS,
    Classify,
    check_supported,
    configure_unstructured,
    partition_markup,
)
from pipelines.models import ClassifiedBatch, ClassifiedDocument, DocumentBatch, DocumentRef

MARKDOWN = """# Quarterly report

Revenue grew in *every* region.
The board approved the plan.

| Region | Revenue |
|--------|---------|
| North  | 120     |
| South  | 95      |

- hire two engineers
- open an office

```python
print("hello")
```
"""
HTML = """<!DOCTYPE html><html><head><title>Cities</title>
<script>var secret = "do-not-leak";</script><style>p { color: red }</style></head>
<body><h1>European cities</h1><p>Paris and Rome are <b>large</b> cities.</p>
<script>alert("leak")</script>
<table><tr><th>City</th><th>Population</th></tr><tr><td>Paris</td><td>2.1M</td></tr>
<tr><td>Rome</td><td>2.8M</td></tr></table></body></html>"""
GOOD_FILES = {
    "notes.txt": b"First paragraph,\nstill the first.\n\n- apples\n- pears\n\nLast one.\n",
    "report.md": MARKDOWN.encode(),
    "cities.html": HTML.encode(),
    "people.json": json.dumps(
        [
            {"name": "Ann", "age": 31, "tags": ["ops", "dev"], "address": {"city": "Oslo"}},
            {"name": "Bob", "age": None, "active": True},
        ]
    ).encode(),
    "events.jsonl": b'{"event": "login", "user": "ann"}\n\n{"event": "logout", "user": "bob"}\n',
    "people.csv": b'name,age,city\nAnn,31,"Oslo, Norway"\nBob,,Rome\n',
    "people.tsv": b"name\tage\nAnn\t31\nBob\t42\n",
    "wide.txt": "Grüße aus Köln — naïve café.".encode("utf-16"),
    "legacy.txt": "Déjà vu at the café, señor.".encode("latin-1"),
}


@pytest.fixture
def blobs(tmp_path: Path) -> FileBlobStore:
    return FileBlobStore(tmp_path / "blobs")


def store(blobs: FileBlobStore, tmp_path: Path, files: dict[str, bytes]) -> list[DocumentRef]:
    """Write the files to disk, put them in the blob store, and return their refs."""
    refs = []
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        with path.open("rb") as stream:
            size = blobs.put(f"ds/{name}", stream)
        refs.append(
            DocumentRef(id=f"id-{name}", dataset="ds", name=name, blob_key=f"ds/{name}", size=size)
        )
    return refs


def classify(
    blobs: FileBlobStore, refs: list[DocumentRef], max_bytes: int = 1 << 20
) -> ClassifiedBatch:
    return Classify(blobs, max_bytes=max_bytes).run(DocumentBatch(dataset="ds", documents=refs))


def by_name(batch: ClassifiedBatch) -> dict[str, ClassifiedDocument]:
    return {doc.document.name: doc for doc in batch.documents}


def texts(doc: ClassifiedDocument) -> list[tuple[str, str]]:
    return [(e.kind, e.text) for e in doc.elements]


@pytest.fixture
def good(blobs: FileBlobStore, tmp_path: Path) -> dict[str, ClassifiedDocument]:
    batch = classify(blobs, store(blobs, tmp_path, GOOD_FILES))
    assert batch.errors == []
    return by_name(batch)


def test_plain_text_is_split_into_paragraphs_and_lists(good: dict) -> None:
    assert good["notes.txt"].kind == "txt"
    assert texts(good["notes.txt"]) == [
        ("text", "First paragraph, still the first."),
        ("list", "- apples\n- pears"),
        ("text", "Last one."),
    ]


def test_markdown_keeps_titles_tables_lists_and_code(good: dict) -> None:
    doc = good["report.md"]
    assert doc.kind == "md"
    assert texts(doc) == [
        ("title", "Quarterly report"),
        ("text", "Revenue grew in every region. The board approved the plan."),
        ("table", "Region: North, Revenue: 120\nRegion: South, Revenue: 95"),
        ("list", "- hire two engineers\n- open an office"),
        ("code", 'print("hello")'),
    ]


def test_html_tables_are_rows_and_scripts_do_not_leak(good: dict) -> None:
    doc = good["cities.html"]
    assert texts(doc) == [
        ("title", "European cities"),
        ("text", "Paris and Rome are large cities."),
        ("table", "City: Paris, Population: 2.1M\nCity: Rome, Population: 2.8M"),
    ]
    everything = " ".join(e.text for e in doc.elements)
    assert "leak" not in everything and "secret" not in everything and "color" not in everything


def test_json_array_gives_one_element_per_record(good: dict) -> None:
    assert texts(good["people.json"]) == [
        ("text", "name: Ann; age: 31; tags: ops, dev; address.city: Oslo"),
        ("text", "name: Bob; active: true"),
    ]


def test_json_lines_give_one_element_per_line(good: dict) -> None:
    assert texts(good["events.jsonl"]) == [
        ("text", "event: login; user: ann"),
        ("text", "event: logout; user: bob"),
    ]


def test_csv_and_tsv_rows_name_their_columns(good: dict) -> None:
    assert texts(good["people.csv"]) == [
        ("table", "name: Ann, age: 31, city: Oslo, Norway\nname: Bob, city: Rome")
    ]
    assert texts(good["people.tsv"]) == [("table", "name: Ann, age: 31\nname: Bob, age: 42")]


def test_utf16_and_latin1_text_are_decoded(good: dict) -> None:
    assert texts(good["wide.txt"]) == [("text", "Grüße aus Köln — naïve café.")]
    assert texts(good["legacy.txt"]) == [("text", "Déjà vu at the café, señor.")]


def test_content_beats_extension_when_it_is_unambiguous(
    blobs: FileBlobStore, tmp_path: Path
) -> None:
    files = {
        "page.txt": b"<!doctype html><html><body><p>Hello there.</p></body></html>",
        "lines.json": b'{"a": 1}\n{"a": 2}\n',
        "semi.csv": b"name;age\nAnn;31\n",
    }
    docs = by_name(classify(blobs, store(blobs, tmp_path, files)))
    assert (docs["page.txt"].kind, texts(docs["page.txt"])) == ("html", [("text", "Hello there.")])
    assert texts(docs["lines.json"]) == [("text", "a: 1"), ("text", "a: 2")]
    assert texts(docs["semi.csv"]) == [("table", "name: Ann, age: 31")]


def test_many_csv_rows_are_grouped_into_several_table_elements(
    blobs: FileBlobStore, tmp_path: Path
) -> None:
    rows = "".join(f"{i},item {i}\n" for i in range(45))
    doc = by_name(
        classify(blobs, store(blobs, tmp_path, {"big.csv": f"id,name\n{rows}".encode()}))
    )["big.csv"]
    assert [e.kind for e in doc.elements] == ["table"] * 3
    assert [len(e.text.split("\n")) for e in doc.elements] == [20, 20, 5]


BAD_FILES = {
    "empty.txt": (b"", "empty"),
    "blank.md": (b"  \n\t\n", "only whitespace"),
    "nul.txt": (b"abc\x00def", "NUL byte at offset 3"),
    "photo.txt": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "PNG image"),
    "noise.txt": (bytes(range(128, 256)) * 4, "binary content"),
    "tool.exe": (b"MZ\x90\x00", "unsupported file type '.exe'"),
    "broken.json": (b'{"a": 1,\n  "b": }', "invalid JSON at line 2, column 8"),
    "broken.jsonl": (b'{"a": 1}\n{"a": \n', "invalid JSON on line 2"),
    "huge.txt": (b"word " * 300, "larger than the limit of 1000 bytes"),
}


def test_bad_documents_are_reported_and_good_ones_still_processed(
    blobs: FileBlobStore, tmp_path: Path
) -> None:
    refs = store(
        blobs, tmp_path, {name: data for name, (data, _) in BAD_FILES.items()} | GOOD_FILES
    )
    refs.append(
        DocumentRef(id="id-gone.txt", dataset="ds", name="gone.txt", blob_key="ds/gone.txt")
    )
    batch = classify(blobs, refs, max_bytes=1000)

    errors = {e.document_name: e for e in batch.errors}
    assert set(errors) == set(BAD_FILES) | {"gone.txt"}
    for name, (_, expected) in BAD_FILES.items():
        assert expected in errors[name].message, errors[name].message
        assert (errors[name].step, errors[name].document_id) == ("classify", f"id-{name}")
    assert "missing" in errors["gone.txt"].message
    assert ".txt" in errors["tool.exe"].message  # says what is supported
    assert "SQLite database files" in errors["tool.exe"].message
    assert set(by_name(batch)) == set(GOOD_FILES)
    assert all(doc.elements for doc in batch.documents)


def test_oversize_is_refused_before_reading_when_the_size_is_known(blobs: FileBlobStore) -> None:
    ref = DocumentRef(
        id="x", dataset="ds", name="big.txt", blob_key="ds/never-written.txt", size=5000
    )
    [error] = classify(blobs, [ref], max_bytes=1000).errors
    assert "larger than the limit" in error.message


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("notes.txt", b"hello", None),
        ("notes.md", "café".encode()[:-1], None),  # a head may end inside a character
        ("notes.TXT", "hi".encode("utf-16"), None),
        ("archive.zip", b"PK\x03\x04", "unsupported file type '.zip'"),
        ("README", b"hello", "without an extension"),
        ("notes.txt", b"", "empty"),
        ("notes.txt", b"ab\x00cd", "NUL byte"),
        ("image.md", b"\x89PNG\r\n\x1a\n", "PNG image"),
        ("doc.html", b"%PDF-1.7", "a PDF"),
    ],
)
def test_check_supported_rejects_early(name: str, head: bytes, expected: str | None) -> None:
    message = check_supported(name, head)
    assert message == expected if expected is None else expected in (message or "")


def test_supported_extensions_cover_every_sample() -> None:
    assert {Path(name).suffix for name in GOOD_FILES} <= SUPPORTED_EXTENSIONS


def test_classify_validates_its_configuration(blobs: FileBlobStore) -> None:
    with pytest.raises(ValueError, match="got 0"):
        Classify(blobs, max_bytes=0)


@pytest.mark.slow
def test_unstructured_runs_offline_with_the_installed_spacy_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lookups: list[str] = []

    def no_network(host: str, *args: object, **kwargs: object) -> None:
        lookups.append(host)
        raise OSError("no network in unit tests")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    configure_unstructured()
    from unstructured.nlp import tokenize

    assert partition_markup("# Title\n\nSome text.", "md")
    nlp = tokenize._get_nlp()  # what unstructured's partition_text and friends would load
    assert f"{nlp.meta['lang']}_{nlp.meta['name']}" == SPACY_MODEL
    assert tokenize.sent_tokenize("One sentence here. Another one there.") == [
        "One sentence here.",
        "Another one there.",
    ]
    telemetry = [t for t in threading.enumerate() if t.name == "unstructured-telemetry"]
    assert (lookups, telemetry) == ([], [])
    assert os.environ["DO_NOT_TRACK"] and os.environ["UNSTRUCTURED_DISABLE_NOTICE"] == "1"
