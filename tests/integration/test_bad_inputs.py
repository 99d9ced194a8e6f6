"""A folder mixing every supported format with 22 kinds of broken file, through a real job.

Each broken file gets its own reason, at add time when its first bytes tell (check_supported)
and again as a per-document error when it reaches cognify anyway; every valid file in the same
job is fully processed (its chunks are in the graph).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from core.catalog import AddReport
from core.models.jobs import Job
from pipelines.classify import check_supported
from runtime import Runtime
from tests import sample_files as sf
from tests.backends import (
    embedded_only,
    finished,
)
from workers.orchestration import cognify

MAX_FILE_BYTES = 400_000
# The slow e-mail below takes ~28 CPU-s to parse; importing a parser ~2 s alone and over 10 s
# on a loaded machine, where the office files must still finish in time.
PARSE_TIMEOUT_S = 20
RNG = random.Random(7)
NOISE = bytes(RNG.randrange(256) for _ in range(4000))

# name -> (content, a phrase that must be in one of its chunks)
GOOD: dict[str, tuple[bytes, str]] = {
    "notes.txt": (b"Ada Lovelace wrote the first program.\n\n- notes\n- letters\n", "Lovelace"),
    "guide.md": (b"# Setup\n\nInstall the engine, then run it.\n", "Install the engine"),
    "page.html": (b"<html><body><h1>Cities</h1><p>Oslo is cold.</p></body></html>", "Oslo is cold"),
    "paper.pdf": (sf.pdf_bytes(), "born in Warsaw"),
    "report.docx": (sf.docx_bytes(), "Region: South, Revenue: 95"),
    "slides.pptx": (sf.pptx_bytes(), "City: Rome, Population: 2.8M"),
    "people.xlsx": (sf.xlsx_bytes(), "name: Ann, age: 31, city: Oslo"),
    "release.eml": (sf.eml_bytes(), "ships on Friday"),
    "people.csv": (b"name,city\nAnn,Oslo\nBob,Rome\n", "name: Bob, city: Rome"),
    "ragged.csv": (b"name,city\nAnn\nBob,Rome,Italy\n", "name: Bob, city: Rome, column 3: Italy"),
    "people.tsv": (b"name\tage\nAnn\t31\n", "name: Ann, age: 31"),
    "records.json": (json.dumps([{"name": "Ann", "role": "pilot"}]).encode(), "role: pilot"),
    "events.jsonl": (b'{"event": "login", "user": "ann"}\n', "event: login"),
    "graph.py": (sf.PYTHON_SOURCE.encode(), "def distance("),
    "app.js": (sf.JS_SOURCE.encode(), "function parse(text)"),
    "wide.txt": ("Grüße aus Köln.".encode("utf-16-le"), "Grüße aus Köln."),  # no BOM
}

# name -> (content, reason at add time or None when only cognify can tell, reason at cognify)
BAD: dict[str, tuple[bytes, str | None, str]] = {
    "empty.txt": (b"", "empty (0 bytes)", "empty (0 bytes)"),
    "blank.md": (b"  \n\t\n", None, "only whitespace"),
    "noise.txt": (bytes(range(128, 160)) * 20, "binary content", "tried UTF-8"),
    "utf16-junk.txt": (b"\x00\x9f" + NOISE, "NUL byte at offset 0", "NUL byte at offset 0"),
    "photo.pdf": (b"\x89PNG\r\n\x1a\n" + NOISE, "it is a PNG image", "it is a PNG image"),
    "truncated.pdf": (sf.pdf_bytes()[:700], None, "truncated PDF"),
    "locked.pdf": (sf.encrypted_pdf_bytes(), None, "the PDF is encrypted; decrypt it"),
    "scan.pdf": (sf.pdf_bytes(text=False), None, "no text layer"),
    "garbled.pdf": (b"%PDF-1.4\n" + NOISE + b"\n%%EOF\n", None, "corrupt or truncated PDF"),
    "bomb.docx": (sf.docx_bytes({"word/media/z.bin": bytes(8 << 20)}), None, "zip bomb"),
    "random.docx": (NOISE, "not a valid .docx file", "not a valid .docx file"),
    "other.docx": (
        sf.add_members(sf.xlsx_bytes(), {"note.txt": b"a workbook"}),  # not people.xlsx's bytes
        None,
        "has no word/document.xml",
    ),
    "cut.pptx": (sf.pptx_bytes()[:5000], None, "corrupt PowerPoint presentation"),
    "sheet.xlsx": (b"name,age\nAnn,31\n", "looks like CSV", "looks like CSV"),
    "invalid.json": (b'{"a": 1,, }', None, "invalid JSON at line 1"),
    "bad.jsonl": (b'{"a": 1}\n{"a": \n', None, "invalid JSON on line 2"),
    "unclosed.csv": (b'id,note\n1,"never closed\n' + b"x" * 140_000, None, "unclosed quote"),
    "scripts.html": (b"<html><script>var a = 1;</script></html>", None, "no text left"),
    "silent.eml": (sf.eml_bytes(body=None, attachment=False), None, "no text body"),
    "slow.eml": (sf.slow_eml_bytes(390_000), None, f"took longer than {PARSE_TIMEOUT_S} s"),
    "tool.exe": (b"MZ\x90\x00" + NOISE, "unsupported file type '.exe'", "unsupported file"),
    "huge.txt": (b"word " * 100_000, "above the limit of 400000", ""),  # never stored
}


@pytest.fixture
def runtime_settings() -> dict[str, object]:
    return {
        "batch_size": 8,
        "max_file_bytes": MAX_FILE_BYTES,
        "parse_timeout_seconds": PARSE_TIMEOUT_S,
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, (data, *_) in (GOOD | BAD).items():
        (corpus / name).write_bytes(data)
    return corpus


def add(rt: Runtime, folder: Path, check) -> AddReport:  # noqa: ANN001
    report = AddReport()
    for path in sorted(folder.iterdir()):
        rt.catalog.add_file("mixed", path, path.name, report, check)
    return report


def run(rt: Runtime, timeout: float = 300) -> Job:
    return finished(rt, cognify(rt, "mixed", "default"), timeout)


@embedded_only  # what is tested is the parsing; the stores are the embedded ones
@pytest.mark.slow  # waits out the slow e-mail's 10 s parse deadline
def test_every_broken_file_gets_its_reason_and_every_valid_one_is_processed(
    runtime: Runtime, folder: Path
) -> None:
    assert len(BAD) >= 15
    runtime.catalog.ensure_dataset("mixed")

    report = add(runtime, folder, check_supported)
    rejected = dict(report.rejected)
    expected_at_add = {name for name, (_, reason, _) in BAD.items() if reason}
    assert set(rejected) == expected_at_add
    for name in expected_at_add:
        assert BAD[name][1] in rejected[name], (name, rejected[name])
    assert set(report.added) == set(GOOD) | set(BAD) - expected_at_add

    # Whatever add let through (or an older client stored) is refused again by cognify.
    forced = add(runtime, folder, lambda name, head: None)
    assert dict(forced.rejected) == {"huge.txt": rejected["huge.txt"]}  # the size cap holds

    job = run(runtime)
    assert job.status.value == "succeeded", job
    errors = {e.document_name: e for e in job.errors}
    assert set(errors) == set(BAD) - {"huge.txt"}
    for name, error in errors.items():
        assert BAD[name][2] in error.message, (name, error.message)
        assert error.step in ("classify", "chunk")
    assert job.counts["documents"] == len(GOOD)

    chunks = runtime.graph.find_nodes("mixed", "DocumentChunk", limit=10_000)
    text_by_document: dict[str, str] = {}
    for chunk in chunks:
        name = chunk.properties["document_name"]
        text_by_document[name] = text_by_document.get(name, "") + "\n" + chunk.properties["text"]
    assert set(text_by_document) == set(GOOD)
    for name, (_, phrase) in GOOD.items():
        assert phrase in text_by_document[name], (name, text_by_document[name])
    statuses = {d.name: d.properties["status"] for d in runtime.catalog.documents("mixed")}
    assert {name for name, status in statuses.items() if status == "failed"} == set(errors)
