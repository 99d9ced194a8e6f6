"""A git repository as a source: the files of a branch or tag's commit, through the `git` CLI.

The repository is fetched into a bare cache of its own under COGMILL_HOME (`sync/git/<id>`),
where the last commits a sync read stay reachable (`refs/cogmill/seen/*`) even when the
branch is force-pushed. The cursor keeps the synced commit and each file's blob id and hash;
the next sync reads only what `git diff --name-status -M <cursor> <new>` names (a rename of
an unchanged blob keeps its hash, so its document keeps its identity) and lists the whole
tree only without a usable cursor (first sync, another filter, a cache lost).

Only the URL's own scheme (or `file` for a local path) may be fetched (GIT_ALLOW_PROTOCOL:
no `ext::` helpers, no redirect to another scheme); every git command has a timeout.
Symbolic links and submodules in the tree are reported, not followed.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.settings import Settings
from pipelines.sources.errors import SourceError
from pipelines.sources.folder import too_big
from pipelines.sources.listing import Entry, Listing, Scratch, copy_hashed, name_problem
from pipelines.sources.spec import SourceSpec

SEEN = "refs/cogmill/seen/"
TARGET = "refs/cogmill/target"
BLOB_MODES = ("100644", "100755")
_PATHS_PER_CALL = 500
_HEX = re.compile(r"^[0-9a-f]{40,64}$")


def git_env(scheme: str) -> dict[str, str]:
    """The environment of every git command: no prompt, no system config, one protocol."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "SSH_AUTH_SOCK")}
    return {
        **keep,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ALLOW_PROTOCOL": scheme,
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
    }


def url_scheme(location: str) -> str:
    """The transport git would use for a location: its URL scheme, ssh for scp-like
    `user@host:path`, file for a local path."""
    if "://" in location:
        return location.split("://", 1)[0].lower()
    return "file" if location.startswith("/") else "ssh"


class GitRepo:
    """A bare cache of a source's repository and the git commands run on it."""

    def __init__(self, spec: SourceSpec, settings: Settings, cache: Path) -> None:
        self.spec, self.settings, self.cache = spec, settings, cache
        self.env = git_env(url_scheme(spec.location))

    def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Run git on the cache; SourceError with git's own message when it fails."""
        command = ["git", "-c", "http.followRedirects=false", "--git-dir", str(self.cache), *args]
        try:
            done = subprocess.run(
                command,
                input=stdin,
                env=self.env,
                capture_output=True,
                timeout=self.settings.sync_git_timeout_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise SourceError(
                f"git {args[0]} took longer than {self.settings.sync_git_timeout_seconds:.0f} s "
                "(COGMILL_SYNC_GIT_TIMEOUT_SECONDS)"
            ) from err
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise SourceError(f"git {args[0]} failed: {' '.join(message[-3:])[:500]}")
        return done.stdout

    def fetch(self) -> str:
        """Fetch the ref into the cache; its commit id."""
        if not (self.cache / "HEAD").exists():
            self.cache.mkdir(parents=True, exist_ok=True)
            self.git("init", "--bare", "--quiet")
        ref = self.spec.ref or "HEAD"
        fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--force", "--"]
        self.git(*fetch, self.spec.location, f"+{ref}:{TARGET}")
        commit = self.git("rev-parse", "--verify", "--quiet", f"{TARGET}^{{commit}}")
        return commit.decode().strip()

    def keep(self, *commits: str) -> None:
        """Keep these commits reachable in the cache and let older ones go."""
        wanted = {c for c in commits if c}
        for line in self.git("for-each-ref", "--format=%(refname)", SEEN).decode().splitlines():
            if line.removeprefix(SEEN) not in wanted:
                self.git("update-ref", "-d", line)
        for commit in wanted:
            self.git("update-ref", SEEN + commit, commit)

    def has(self, commit: str) -> bool:
        try:
            self.git("cat-file", "-e", f"{commit}^{{commit}}")
        except SourceError:
            return False
        return True

    def tree(
        self, commit: str, paths: list[str] | None = None
    ) -> Iterator[tuple[str, str, str, int]]:
        """(path, mode, blob id, size) of the commit's files, or of just `paths`."""
        if paths is None:
            chunks: list[list[str]] = [[]]
        else:
            chunks = [paths[i : i + _PATHS_PER_CALL] for i in range(0, len(paths), _PATHS_PER_CALL)]
        for chunk in chunks:
            out = self.git("ls-tree", "-r", "-z", "--long", commit, "--", *chunk)
            for record in out.split(b"\0"):
                if record:
                    meta, _, path = record.partition(b"\t")
                    mode, _kind, oid, size = meta.decode().split()
                    yield path.decode("utf-8", "replace"), mode, oid, _size(size)

    def changes(self, old: str, new: str) -> list[tuple[str, list[str]]]:
        """`git diff --name-status -M` between two commits: (status letter, paths)."""
        out = self.git("diff", "--name-status", "-z", "-M", "--no-ext-diff", old, new)
        fields = [f.decode("utf-8", "replace") for f in out.split(b"\0")]
        found: list[tuple[str, list[str]]] = []
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i]
            count = 2 if status[0] in "RC" else 1
            found.append((status, fields[i + 1 : i + 1 + count]))
            i += 1 + count
        return found

    def copy_blob(self, oid: str, target: Path) -> str:
        """Write a blob into a file; the sha256 of its bytes."""
        if not _HEX.match(oid):
            raise SourceError(f"not a blob id: {oid!r}")
        command = ["git", "--git-dir", str(self.cache), "cat-file", "blob", oid]
        with subprocess.Popen(command, stdout=subprocess.PIPE, env=self.env) as proc:
            assert proc.stdout is not None
            digest = copy_hashed(proc.stdout, target)
        if proc.returncode != 0:
            raise SourceError(f"git cat-file could not read blob {oid}")
        return digest


def _size(text: str) -> int:
    return int(text) if text.isdigit() else 0


class GitScan:
    """One sync's reading of a git source against its cursor (`{"commit", "filter", "files":
    {path: [mode, blob id, sha256]}}`)."""

    def __init__(self, spec: SourceSpec, settings: Settings, scratch: Scratch, cache: Path):
        self.spec, self.settings, self.scratch = spec, settings, scratch
        self.repo = GitRepo(spec, settings, cache)

    def listing(self, cursor: dict[str, Any]) -> Listing:
        new = self.repo.fetch()
        old = str(cursor.get("commit") or "")
        shape = [self.spec.include, self.spec.exclude]
        files: dict[str, list[Any]] = {}
        known = bool(old) and self.repo.has(old)
        if known and cursor.get("filter") == shape:
            files = {path: list(v) for path, v in cursor.get("files", {}).items()}
            self._apply(files, self.repo.changes(old, new) if old != new else [], new)
        else:
            files = {path: [mode, oid, None, size] for path, mode, oid, size in self._all(new)}
        self.repo.keep(old if known else "", new)
        listing = Listing(cursor={"commit": new, "filter": shape, "files": {}}, commit=new)
        for path in sorted(files):
            self._entry(path, files[path], listing)
        return listing

    def _all(self, commit: str) -> Iterator[tuple[str, str, str, int]]:
        for path, mode, oid, size in self.repo.tree(commit):
            if self._takes(path):
                yield path, mode, oid, size

    def _takes(self, path: str) -> bool:
        hidden = any(part.startswith(".") for part in path.split("/"))
        return not hidden and self.spec.filter.takes(path)

    def _apply(
        self, files: dict[str, list[Any]], changes: list[tuple[str, list[str]]], new: str
    ) -> None:
        """Bring the cursor's files to the new commit: what the diff names is read again."""
        touched: list[str] = []
        for status, paths in changes:
            if status[0] in "DR":
                files.pop(paths[0], None)
            touched += [paths[-1]] if status[0] != "D" else []
        wanted = [p for p in touched if self._takes(p)]
        before = {v[1]: v[2] for v in files.values()}  # a blob's hash, known from the cursor
        for path, mode, oid, size in self.repo.tree(new, wanted):
            files[path] = [mode, oid, before.get(oid), size]

    def _entry(self, path: str, info: list[Any], listing: Listing) -> None:
        mode, oid, digest = info[0], info[1], info[2]
        size = info[3] if len(info) > 3 else 0
        settings = self.settings
        if len(listing.entries) >= settings.sync_max_files:
            raise SourceError(
                f"the repository holds more than {settings.sync_max_files} files to sync; narrow "
                "it with include/exclude globs or raise COGMILL_SYNC_MAX_FILES"
            )
        if mode == "120000":
            listing.rejected.append((path, "a symbolic link in the repository: not followed"))
        elif mode == "160000":
            listing.rejected.append((path, "a submodule: not synced (sync it as its own source)"))
        elif mode not in BLOB_MODES:
            listing.rejected.append((path, f"not a file (git mode {mode})"))
        elif problem := name_problem(path, settings.sync_max_path_chars):
            listing.rejected.append((path[:80], problem))
        elif size > settings.max_file_bytes:
            listing.rejected.append((path, too_big(size, settings.max_file_bytes)))
        else:
            copied: Path | None = None
            if digest is None:  # read now: its hash decides whether the dataset has it
                copied = self.scratch.path()
                digest = self.repo.copy_blob(oid, copied)
            listing.cursor["files"][path] = [mode, oid, digest, size]
            listing.entries[path] = Entry(path, digest, self._materializer(oid, copied), size)

    def _materializer(self, oid: str, copied: Path | None) -> Callable[[], Path]:
        def materialize() -> Path:
            if copied is not None:
                return copied
            target = self.scratch.path()
            self.repo.copy_blob(oid, target)
            return target

        return materialize
