"""Names from outside: no trailing newline slips past a pattern, and document names are
labels, never paths."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from core.catalog import CatalogError, check_dataset_name, check_node_set
from core.document_names import MAX_DOCUMENT_NAME_CHARS, document_name
from core.stores.blob_fs import FileBlobStore
from core.stores.sqlite.state import SQLiteStateStore
from retrieval.sessions import SessionError, SessionStore, check_session_id

pytestmark = pytest.mark.unit

TRAILING = ["abc\n", "abc\r\n", "abc\n\n", "\nabc"]


@pytest.mark.parametrize("name", TRAILING)
def test_dataset_and_node_set_names_refuse_line_ends(name: str) -> None:
    assert check_dataset_name("abc") == "abc" and check_node_set("abc") == "abc"
    with pytest.raises(CatalogError, match="invalid dataset name"):
        check_dataset_name(name)
    with pytest.raises(CatalogError, match="invalid node set name"):
        check_node_set(name)


@pytest.mark.parametrize("name", TRAILING)
def test_session_ids_refuse_line_ends(name: str) -> None:
    assert check_session_id("chat-42") == "chat-42"
    with pytest.raises(SessionError, match="invalid session id"):
        check_session_id(name)


def test_answer_ids_refuse_a_line_end(tmp_path: Path) -> None:
    sessions = SessionStore(SQLiteStateStore(tmp_path / "state.db"), ttl_seconds=60)
    qa_id = "0" * 20 + "abcdef"
    assert sessions.qa("chat", qa_id) is None  # well formed, not stored
    with pytest.raises(SessionError, match="invalid answer id"):
        sessions.qa("chat", qa_id + "\n")


def test_blob_keys_refuse_a_line_end(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path)
    assert blobs.put("ds/a.txt", io.BytesIO(b"x")) == 1
    with pytest.raises(ValueError, match="invalid blob key"):
        blobs.put("ds/a.txt\n", io.BytesIO(b"x"))


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("folder/sub/notes.md", "notes.md"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("/abs/path.txt", "path.txt"),
        ("na\x00me.txt", "name.txt"),
        ("report\n.pdf", "report.pdf"),
        ("  spaced.txt  ", "spaced.txt"),
        ("evil\u202etxt.exe", "eviltxt.exe"),  # a right-to-left override hides the extension
        ("résumé – 2024.docx", "résumé – 2024.docx"),
    ],
)
def test_document_names_are_base_names_without_control_characters(raw: str, name: str) -> None:
    assert document_name(raw) == name


@pytest.mark.parametrize("raw", ["", "..", ".", "../", "a/..", "\x00", "dir/", " \n "])
def test_document_names_with_nothing_left_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="has no file name in it"):
        document_name(raw)


def test_long_document_names_are_cut_keeping_the_extension() -> None:
    name = document_name("x" * 1000 + ".pdf")
    assert len(name) == MAX_DOCUMENT_NAME_CHARS and name.endswith("x.pdf")
