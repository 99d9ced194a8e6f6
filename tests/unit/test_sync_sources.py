"""Sources a dataset follows, read without any store: globs and their bounds, what a source
is taken for, a folder's links and its stat cache, who may have the server read what, and
SQL tables read from their updated column."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from core.settings import Settings
from pipelines.sources import SourceAccessError, SourceError, read_source
from pipelines.sources.access import check_access
from pipelines.sources.folder import open_inside
from pipelines.sources.globs import PathFilter, check_globs, matches
from pipelines.sources.listing import Listing, Scratch
from pipelines.sources.spec import SourceKind, guess_kind, hide_credentials, parse_source

pytestmark = pytest.mark.unit


def settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(home=tmp_path / "home", _env_file=None, **values)  # type: ignore[call-arg]


def scan(
    tmp_path: Path, spec_or_path: object, cursor: dict | None = None, **values: object
) -> Listing:
    spec = spec_or_path if not isinstance(spec_or_path, Path) else parse_source(str(spec_or_path))
    scratch = Scratch(tmp_path / "scratch")
    scratch.clear()

    def previous(name: str, digest: str) -> Path | None:
        return None  # a first sync of every table

    return read_source(spec, cursor or {}, settings(tmp_path, **values), scratch, previous, "id")


def test_globs_match_names_anywhere_and_paths_from_the_root() -> None:
    assert matches("*.md", "a/b/notes.md") and not matches("*.md", "a/notes.txt")
    assert matches("docs/**/*.md", "docs/x.md") and matches("docs/**/*.md", "docs/a/b/x.md")
    assert not matches("docs/**/*.md", "other/docs/x.md")
    assert not matches("docs/*.md", "docs/a/x.md")  # a star never crosses a folder
    only = PathFilter(include=("*.md", "*.txt"), exclude=("build", "drafts/**"))
    assert only.takes("a/b.md") and not only.takes("a/b.pdf")
    assert not only.takes("build/x.md") and not only.takes("src/build/x.md")
    assert not only.takes("drafts/x.md") and only.prunes("build")


def test_globs_over_their_bounds_are_refused_and_stars_cost_little() -> None:
    with pytest.raises(SourceError, match="COGMILL_SYNC_MAX_GLOBS"):
        check_globs(["*.md"] * 3, "include", 2, 100)
    with pytest.raises(SourceError, match="COGMILL_SYNC_MAX_GLOB_CHARS"):
        check_globs(["x" * 101], "include", 2, 100)
    with pytest.raises(SourceError, match="absolute"):
        check_globs(["/etc/*"], "exclude", 2, 100)
    started = time.perf_counter()
    assert not matches("*a" * 120 + "b", "a" * 1000)  # exponential for a naive matcher
    assert not matches("/".join(["**"] * 60) + "/b", "/".join(["a"] * 500))
    assert time.perf_counter() - started < 2


def test_a_source_is_told_by_its_location(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    assert guess_kind("sqlite:///shop.db") is SourceKind.SQL
    assert guess_kind("postgresql+psycopg://u@db/shop") is SourceKind.SQL
    assert guess_kind("https://example.org/r.git") is SourceKind.GIT
    assert guess_kind("git@example.org:team/r.git") is SourceKind.GIT
    assert guess_kind(str(tmp_path / "repo")) is SourceKind.GIT
    assert guess_kind(str(tmp_path / "plain")) is SourceKind.FOLDER
    assert parse_source(str(tmp_path / "repo"), "folder").kind is SourceKind.FOLDER
    with pytest.raises(SourceError, match="no folder"):
        parse_source(str(tmp_path / "missing"))
    shown = hide_credentials("postgresql://bob:hunter2@db/x")
    assert "hunter2" not in shown and "bob" in shown
    assert "tok3n" not in hide_credentials("https://tok3n@example.org/r.git")


def test_fields_of_another_kind_and_option_like_refs_are_refused(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with pytest.raises(SourceError, match="ref"):
        parse_source(str(tmp_path), ref="main").check(s)
    with pytest.raises(SourceError, match="globs"):
        parse_source("sqlite:///x.db", include=["*.md"]).check(s)
    with pytest.raises(SourceError, match="invalid git ref"):
        parse_source("https://example.org/r.git", ref="--upload-pack=touch").check(s)
    with pytest.raises(SourceError, match="COGMILL_SYNC_SQL_MAX_TABLES"):
        parse_source("sqlite:///x.db", tables=["a", "b", "c"]).check(
            settings(tmp_path, sync_sql_max_tables=2)
        )


def test_a_folder_takes_no_link_out_of_it_nor_hidden_files(tmp_path: Path) -> None:
    src, outside = tmp_path / "src", tmp_path / "secret.txt"
    (src / "sub").mkdir(parents=True)
    outside.write_text("not yours")
    (src / "a.txt").write_text("alpha")
    (src / ".env").write_text("hidden")
    os.symlink(outside, src / "leak.txt")
    os.symlink(src / "a.txt", src / "sub" / "alias.txt")
    os.symlink(tmp_path, src / "up")
    (src / ("x" * 30 + ".txt")).write_text("long")
    (src / "bad\x1bname.txt").write_text("escape")
    found = scan(tmp_path, src, sync_max_path_chars=20)
    assert sorted(found.entries) == ["a.txt", "sub/alias.txt"]
    reasons = dict(found.rejected)
    assert "out of the source folder" in reasons["leak.txt"]
    assert "not followed" in reasons["up"]
    assert "COGMILL_SYNC_MAX_PATH_CHARS" in reasons["x" * 30 + ".txt"]
    assert "control characters" in reasons["bad\x1bname.txt"]
    with pytest.raises(SourceError):  # a link opened as a file is refused, whatever it is
        open_inside(str(src / "sub" / "alias.txt"), str(src))


def test_a_folder_over_its_file_bound_is_refused(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / f"{i}.txt").write_text(str(i))
    with pytest.raises(SourceError, match="COGMILL_SYNC_MAX_FILES"):
        scan(tmp_path, tmp_path / "src", sync_max_files=3)
    assert len(scan(tmp_path, tmp_path / "src", sync_max_files=4).entries) == 4


def test_the_stat_cache_is_trusted_only_for_files_older_than_the_scan(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    note = src / "note.txt"
    note.write_text("version one")
    old = time.time() - 60
    os.utime(note, (old, old))
    first = scan(tmp_path, src)
    # Same size and time, other bytes: a stat cache cannot see it, and trusts its hash...
    note.write_text("version two")
    os.utime(note, (old, old))
    second = scan(tmp_path, src, first.cursor)
    assert second.entries["note.txt"].digest == first.entries["note.txt"].digest
    # ...but not for a file modified within two seconds of the scan that hashed it.
    recent = first.cursor["scanned_ns"] / 1e9 - 1
    os.utime(note, (recent, recent))
    racy = {**first.cursor, "files": {"note.txt": [11, note.stat().st_mtime_ns, "stale"]}}
    assert scan(tmp_path, src, racy).entries["note.txt"].digest != "stale"
    assert scan(tmp_path, src).entries["note.txt"].digest != first.entries["note.txt"].digest


def test_api_callers_read_only_inside_the_sync_roots(tmp_path: Path) -> None:
    root = tmp_path / "roots"
    (root / "acme" / "docs").mkdir(parents=True)
    (root / "beta").mkdir()
    s = settings(tmp_path, sync_roots=[root])
    inside, other = parse_source(str(root / "acme" / "docs")), parse_source(str(root / "beta"))
    check_access(inside, s, "acme", remote=True)
    check_access(other, s, None, remote=True)  # the local tenant: anywhere below a root
    with pytest.raises(SourceAccessError, match="COGMILL_SYNC_ROOTS"):
        check_access(other, s, "acme", remote=True)  # another tenant's folder
    with pytest.raises(SourceAccessError, match="COGMILL_SYNC_ROOTS"):
        check_access(parse_source(str(tmp_path)), s, None, remote=True)
    with pytest.raises(SourceAccessError):
        check_access(parse_source(f"sqlite:///{tmp_path}/x.db"), s, None, remote=True)
    check_access(parse_source(str(tmp_path)), s, None, remote=False)  # the CLI reads anything


def test_network_sources_and_git_schemes_are_bounded(tmp_path: Path) -> None:
    s = settings(tmp_path)
    local_git = parse_source("https://127.0.0.1/team/repo.git")
    with pytest.raises(SourceAccessError, match="private"):
        check_access(local_git, s, None, remote=True)
    check_access(local_git, settings(tmp_path, sync_allow_private=True), None, remote=True)
    with pytest.raises(SourceAccessError, match="private"):
        check_access(parse_source("postgresql://u:p@localhost/db"), s, None, remote=True)
    for url in ("http://example.org/r.git", "git://example.org/r.git"):
        with pytest.raises(SourceAccessError, match="COGMILL_SYNC_GIT_SCHEMES"):
            check_access(parse_source(url), s, None, remote=False)


ROWS = "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2);"


def make_db(path: Path, script: str) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(script)
        conn.commit()


def test_sql_tables_are_read_from_their_updated_column(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    make_db(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, at INT); " + ROWS)
    spec = parse_source(f"sqlite:///{db}", updated={"*": "at"})
    name = f"sqlite:///{db}#t"
    kept: dict[str, Path] = {}
    s, scratch = settings(tmp_path), Scratch(tmp_path / "scratch")

    def listing(cursor: dict) -> Listing:
        found = read_source(spec, cursor, s, scratch, lambda n, d: kept.get(d), "id")
        entry = found.entries[name]
        kept[entry.digest] = Path(str(entry.materialize()))
        return found

    def fresh() -> str:
        return listing({}).entries[name].digest

    scratch.clear()
    first = listing({})
    assert listing({}).entries[name].digest == first.entries[name].digest  # same rows, bytes
    assert first.cursor["tables"]["t"]["mark"] == ["int", "2"]
    # Row 1 changes below the mark: an incremental read does not see it, a fresh one does.
    # Row 3 comes without an updated value: its new key has it fetched.
    make_db(db, "UPDATE t SET v = 'quiet' WHERE id = 1; INSERT INTO t VALUES (3, 'c', NULL);")
    second = listing(first.cursor)
    assert second.entries[name].digest not in (first.entries[name].digest, fresh())
    make_db(db, "UPDATE t SET v = 'a' WHERE id = 1;")  # back to what the sync kept
    assert second.entries[name].digest == fresh()
    make_db(db, "UPDATE t SET v = 'loud', at = 3 WHERE id = 2; DELETE FROM t WHERE id = 3;")
    third = listing(second.cursor)
    assert third.cursor["tables"]["t"]["mark"] == ["int", "3"]
    assert third.entries[name].digest == fresh()


def test_sql_sources_over_their_bounds_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    make_db(db, "CREATE TABLE keyed (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE loose (v);")
    make_db(db, "INSERT INTO keyed VALUES (1, 'a'), (2, 'b'), (3, 'c');")
    url = f"sqlite:///{db}"
    with pytest.raises(SourceError, match="no primary key"):
        scan(tmp_path, parse_source(url, tables=["loose"]))
    with pytest.raises(SourceError, match="COGMILL_SYNC_SQL_MAX_ROWS"):
        scan(tmp_path, parse_source(url, tables=["keyed"]), sync_sql_max_rows=2)
    with pytest.raises(SourceError, match="COGMILL_SYNC_SQL_MAX_TABLES"):
        scan(tmp_path, parse_source(url), sync_sql_max_tables=1)
    with pytest.raises(SourceError, match="updated column"):
        scan(tmp_path, parse_source(url, tables=["keyed"], updated={"keyed": "missing"}))
