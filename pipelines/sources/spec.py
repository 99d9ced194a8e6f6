"""What a dataset follows: a folder, a git repository at a branch or tag, or SQL tables.

`parse_source` reads the SOURCE argument of `cogmill sync` (and the HTTP body's `source`): a
SQLAlchemy URL (`sqlite:///shop.db`, `postgresql+psycopg://...`) is a SQL source; an
`https://`, `ssh://`, `git://` or `file://` URL, an scp-like `user@host:repo.git` or a local
folder holding a git repository (`.git`, or a bare one) is a git source; any other local
folder is a folder. `kind` overrides the guess (a git working tree synced as a folder).
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field

from core.models.graph import stable_id
from core.settings import Settings
from pipelines.sources.errors import SourceError
from pipelines.sources.globs import PathFilter, check_globs
from pipelines.structured.key_declarations import KeyDeclarations

GIT_URL_SCHEMES = ("https", "http", "ssh", "git", "file")
SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)")
# A branch or tag name as git accepts one, and no option in disguise.
REF = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/+-]{1,255}$")
ANY_TABLE = "*"


class SourceKind(StrEnum):
    FOLDER = "folder"
    GIT = "git"
    SQL = "sql"


class SourceSpec(BaseModel):
    """A source as given: its kind, where it is, and what of it a dataset takes."""

    kind: SourceKind
    location: str = Field(description="Folder path, git URL or path, or SQLAlchemy URL")
    ref: str | None = Field(default=None, description="Git branch or tag (default: HEAD)")
    include: list[str] = Field(default_factory=list, description="Globs of files to take")
    exclude: list[str] = Field(default_factory=list, description="Globs of files to leave out")
    tables: list[str] = Field(default_factory=list, description="SQL tables (default: all)")
    keys: KeyDeclarations | None = None
    # SQL: the column that grows with every insert and update, per table ("*": every table
    # that has it); a table without one is read whole at each sync.
    updated: dict[str, str] = Field(default_factory=dict)

    @property
    def filter(self) -> PathFilter:
        return PathFilter(tuple(self.include), tuple(self.exclude))

    def display(self) -> str:
        """The source as shown: credentials in its URL hidden."""
        shown = hide_credentials(self.location)
        return f"{shown}@{self.ref}" if self.ref else shown

    def identity(self, dataset: str) -> str:
        """The id of this source in a dataset (its cursor and documents are filed under it):
        kind, location without credentials and ref; the globs are not part of it, so changing
        them re-decides the same documents."""
        where = hide_credentials(self.location)
        return stable_id("source", dataset, self.kind.value, where, self.ref or "")

    def check(self, settings: Settings) -> SourceSpec:
        """The spec when its fields fit its kind and the bounds; SourceError otherwise."""
        most, chars = settings.sync_max_globs, settings.sync_max_glob_chars
        check_globs(self.include, "include", most, chars)
        check_globs(self.exclude, "exclude", most, chars)
        if len(self.location) > settings.sync_max_path_chars:
            raise SourceError(
                f"the source location is {len(self.location)} characters, more than the "
                f"{settings.sync_max_path_chars} allowed (COGMILL_SYNC_MAX_PATH_CHARS)"
            )
        wrong = []
        if self.kind is not SourceKind.GIT and self.ref:
            wrong.append("a ref (git sources only)")
        if self.kind is SourceKind.SQL and (self.include or self.exclude):
            wrong.append("include/exclude globs (folders and git repositories only)")
        if self.kind is not SourceKind.SQL and (self.tables or self.keys or self.updated):
            wrong.append("tables, keys or updated columns (SQL sources only)")
        if wrong:
            raise SourceError(f"a {self.kind.value} source takes no {'; no '.join(wrong)}")
        if self.ref is not None and not REF.match(self.ref):
            raise SourceError(
                f"invalid git ref {self.ref!r}: give a branch or tag name such as main or v1.2"
            )
        if len(self.tables) > settings.sync_sql_max_tables:
            raise SourceError(
                f"{len(self.tables)} tables given, more than the {settings.sync_sql_max_tables} "
                "allowed (COGMILL_SYNC_SQL_MAX_TABLES)"
            )
        return self


def hide_credentials(location: str) -> str:
    """A URL with its password (or token) replaced by ***; other text as it is."""
    if "://" not in location:
        return location
    parts = urlsplit(location)
    # An http(s) user name alone is often a token (https://TOKEN@host/repo.git).
    token = parts.username is not None and parts.scheme in ("http", "https")
    if parts.password is None and not token:
        return location
    host = parts.hostname or ""
    host += f":{parts.port}" if parts.port else ""
    user = f"{parts.username}:***@" if parts.password is not None else "***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def parse_updated(values: list[str]) -> dict[str, str]:
    """`--updated-column COLUMN` (every table that has it) or `TABLE=COLUMN` flags."""
    updated: dict[str, str] = {}
    for value in values:
        table, eq, column = value.partition("=")
        table, column = (table.strip(), column.strip()) if eq else (ANY_TABLE, table.strip())
        if not table or not column:
            raise SourceError(
                f"--updated-column {value!r} must be COLUMN or TABLE=COLUMN, e.g. updated_at"
            )
        updated[table] = column
    return updated


def guess_kind(location: str) -> SourceKind:
    """The kind of source a location names (see the module docstring)."""
    scheme = location.split("://", 1)[0].lower() if "://" in location else ""
    if scheme in GIT_URL_SCHEMES or SCP_LIKE.match(location):
        return SourceKind.GIT
    if scheme:
        return SourceKind.SQL
    path = Path(location)
    try:
        repository = (path / ".git").exists() or all(
            (path / p).exists() for p in ("HEAD", "objects", "refs")
        )
    except OSError as err:  # a name too long for the file system, say
        raise SourceError(f"cannot read {location[:80]!r}: {err.strerror or err}") from None
    return SourceKind.GIT if repository else SourceKind.FOLDER


def parse_source(location: str, kind: str | None = None, **fields: object) -> SourceSpec:
    """A spec from a SOURCE argument (a local path made absolute) and the other fields.
    SourceError for an unknown kind or a local source that is missing."""
    location = location.strip()
    if not location:
        raise SourceError("give a source: a folder, a git repository URL or path, or a SQL URL")
    if kind and kind not in {k.value for k in SourceKind}:
        raise SourceError(f"unknown source kind {kind!r}; use folder, git or sql")
    chosen = SourceKind(kind) if kind else guess_kind(location)
    if chosen is not SourceKind.SQL and "://" not in location and not SCP_LIKE.match(location):
        path = Path(location)
        try:
            found = path.is_dir()
        except OSError as err:
            raise SourceError(f"cannot read {location[:80]!r}: {err.strerror or err}") from None
        if not found:
            raise SourceError(f"no folder {location[:200]!r} (a {chosen.value} source is a folder)")
        location = str(path.resolve())
    if chosen is SourceKind.SQL:
        location = _absolute_sqlite(location)
    return SourceSpec.model_validate({"kind": chosen, "location": location, **fields})


def _absolute_sqlite(url: str) -> str:
    """A SQLite URL with its file's path made absolute (a worker's working folder is not the
    caller's); other URLs as they are."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise SourceError(f"{err}; give a SQLAlchemy URL such as sqlite:///shop.db") from None
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if Path(database).is_absolute():
        return url
    return parsed.set(database=str(Path(database).resolve())).render_as_string(hide_password=False)
