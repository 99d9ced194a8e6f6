"""Sources a dataset follows (`cogmill sync`): a folder, a git repository, SQL tables.

`read_source` reads what a source holds now against its cursor (spec.py, folder.py, git.py,
sql.py); `Mirror` (mirror.py) makes the dataset hold exactly that; access.py says which sources
a caller may have the server read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.settings import Settings
from pipelines.sources.errors import SourceAccessError, SourceError
from pipelines.sources.folder import FolderScan
from pipelines.sources.git import GitScan
from pipelines.sources.listing import Listing, Scratch
from pipelines.sources.spec import SourceKind, SourceSpec
from pipelines.sources.sql import Previous, SqlScan

__all__ = ["SourceAccessError", "SourceError", "SourceKind", "SourceSpec", "read_source"]


def read_source(
    spec: SourceSpec,
    cursor: dict[str, Any],
    settings: Settings,
    scratch: Scratch,
    previous: Previous,
    source_id: str,
) -> Listing:
    """What the source holds now (its documents' names and hashes, what it refused, its new
    cursor). Raises SourceError."""
    if spec.kind is SourceKind.FOLDER:
        return FolderScan(spec, settings, scratch).listing(cursor)
    if spec.kind is SourceKind.GIT:
        cache = Path(settings.home) / "sync" / "git" / source_id
        return GitScan(spec, settings, scratch, cache).listing(cursor)
    return SqlScan(spec, settings, scratch, previous).listing(cursor)
