"""The streaming reader of JSON uploads reads what json.loads reads, whatever the chunking,
and refuses what it must (api/http/json_documents.py; the memory bound is
tests/security/test_json_upload_memory.py's)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from api.http.json_documents import (
    MAX_DOCUMENTS,
    MalformedJSON,
    TextTooLarge,
    TooManyDocuments,
    parse_upload,
)

pytestmark = pytest.mark.unit

TEXTS = [
    "plain ascii",
    "",
    'quotes " and \\ backslashes \\" and / slashes',
    "lines\nand\ttabs\r\n\b\f",
    "Zoë, Ελληνικά, 中文, emoji 😀🎉 and a 𝄞 clef",
    "\u0000\u001f control characters escaped",
    "x" * 5000,
]


def parse(tmp_path: Path, raw: bytes, chunk: int, limit: int = 10**6) -> tuple[Any, list[str]]:
    """The body and the texts written (one folder per call)."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    body = folder / "body.json"
    body.write_bytes(raw)
    parsed = parse_upload(body, folder, limit, chunk_bytes=chunk)
    texts = [p.read_bytes().decode() if p else "" for p in parsed.texts]
    return parsed.body, texts


@pytest.mark.parametrize("ascii_only", [True, False])
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64, 1 << 16])
def test_texts_are_written_as_json_loads_reads_them(
    tmp_path: Path, chunk: int, ascii_only: bool
) -> None:
    extra = {"a": [1, 2.5e3]}  # a key the schema ignores: skipped
    docs = [{"name": f"d{i}.txt", "text": t, "extra": extra} for i, t in enumerate(TEXTS)]
    body = {"x": [None, True], "documents": docs, "node_set": "rules"}
    raw = json.dumps(body, indent=1, ensure_ascii=ascii_only).encode()
    body, texts = parse(tmp_path, raw, chunk)
    assert texts == TEXTS
    assert body == {
        "documents": [{"name": f"d{i}.txt", "text": ""} for i in range(len(TEXTS))],
        "node_set": "rules",
    }


def test_an_escaped_surrogate_pair_split_between_pieces_is_one_character(tmp_path: Path) -> None:
    raw = b'{"documents": [{"name": "a.txt", "text": "a\\ud83d\\ude00b \\ud800 lone"}]}'
    for chunk in range(1, 12):
        assert parse(tmp_path, raw, chunk)[1] == ["a😀b \ufffd lone"]


def test_values_the_schema_checks_are_kept_as_they_are(tmp_path: Path) -> None:
    raw = b'{"documents": [{"name": 5, "text": ["not", "text"]}, 7], "node_set": null}'
    body, texts = parse(tmp_path, raw, 4)
    assert body == {"documents": [{"name": 5, "text": ["not", "text"]}, 7], "node_set": None}
    assert texts == ["", ""]  # no file for either


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b"", "expected an object"),
        (b"[]", "expected an object"),
        (b'{"documents": [}', "expected a value"),
        (b'{"documents": []} x', "expected the end of the body"),
        (b'{"documents": [{"name": "a", "text": "unterminated', "unterminated string"),
        (b'{"documents": [{"text": "bad \\q escape"}]}', "invalid escape"),
        (b'{"documents": [{"text": "raw \x01 control"}]}', "control character"),
        (b'{"documents": [], "documents": []}', "'documents' is given twice"),
        (b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}", "nested deeper than 64"),
        (b'{"documents": [{"name": "' + b"n" * 70_000 + b'"}]}', "over 65536 bytes"),
    ],
)
def test_malformed_bodies_are_refused_saying_where(tmp_path: Path, raw: bytes, where: str) -> None:
    with pytest.raises(MalformedJSON, match=where) as caught:
        parse(tmp_path, raw, 3)
    assert "at byte" in str(caught.value)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"documents": [{"name": "a.txt", "text": "caf\xe9 in Latin-1"}]}',
        b'{"documents": [{"name": "\xff.txt", "text": "x"}]}',
        b'{"node_set": ' + b"9" * 5000 + b"}",
    ],
)
def test_what_only_decoding_finds_is_refused_too(tmp_path: Path, raw: bytes) -> None:
    with pytest.raises(MalformedJSON):
        parse(tmp_path, raw, 1 << 16)


def test_a_text_over_the_limit_and_too_many_documents_are_refused(tmp_path: Path) -> None:
    raw = json.dumps({"documents": [{"text": "ok"}, {"text": "é" * 6}]}).encode()
    with pytest.raises(TextTooLarge) as caught:
        parse(tmp_path, raw, 5, limit=11)  # the second text is 12 bytes of UTF-8
    assert caught.value.index == 1
    many = json.dumps({"documents": [{"text": ""}] * (MAX_DOCUMENTS + 1)}).encode()
    with pytest.raises(TooManyDocuments):
        parse(tmp_path, many, 1 << 16)


def test_a_long_run_of_escapes_is_read_in_one_pass(tmp_path: Path) -> None:
    text = "\n" * 1_000_000  # one regex match spans a whole chunk of escapes
    raw = json.dumps({"documents": [{"name": "n.txt", "text": text}]}).encode()
    _, texts = parse(tmp_path, raw, 1 << 16, limit=2_000_000)
    assert texts == [text]
