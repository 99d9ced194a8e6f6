"""What a source holds now, as a sync compares it with the dataset: a document per name with
its content hash, the files refused (with the reason), and the cursor to keep once the sync's
job succeeds (file hashes, the commit, the tables' high-water marks)."""

from __future__ import annotations

import hashlib
import os
import shutil
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pipelines.structured.key_declarations import KeyDeclarations

BLOCK = 1 << 20


@dataclass
class Entry:
    """One document of a source: its name (a relative path, or URL#table), its content's
    sha256, how to put its bytes in a file for the catalog to add, and its size."""

    name: str
    digest: str
    materialize: Callable[[], Path]
    size: int = 0


@dataclass
class Listing:
    """A source's documents by name, what was refused, and its new cursor."""

    entries: dict[str, Entry] = field(default_factory=dict)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    cursor: dict[str, Any] = field(default_factory=dict)
    commit: str | None = None  # a git source's synced commit, recorded on every document
    keys: KeyDeclarations | None = None  # a SQL source's declared keys, kept for the dataset


def name_problem(name: str, most: int) -> str | None:
    """Why a relative path cannot name a document (None: it can): too long, not UTF-8, or
    holding control characters."""
    if len(name) > most:
        return f"a path longer than {most} characters (COGMILL_SYNC_MAX_PATH_CHARS)"
    if "\ufffd" in name:
        return "a path that is not UTF-8: rename it"
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in name):
        return "a path holding control characters: rename it"
    return None


def copy_hashed(stream: IO[bytes], target: Path) -> str:
    """Copy a stream into a new file, returning the sha256 of what was copied."""
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        for block in iter(lambda: stream.read(BLOCK), b""):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def hash_stream(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(BLOCK), b""):
        digest.update(block)
    return digest.hexdigest()


class Scratch:
    """Numbered files in a scratch folder: what the catalog adds is copied here first, so it
    reads exactly the bytes that were checked (never a path that changed since)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._next = 0

    def path(self) -> Path:
        self._next += 1
        return self.folder / f"{self._next:08d}"

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        os.makedirs(self.folder, exist_ok=True)
