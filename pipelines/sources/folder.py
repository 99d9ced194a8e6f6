"""A folder as a source: its files (recursively, hidden ones skipped) under their paths
relative to the folder, with their content hashes.

A file whose size and modification time are those the cursor kept is not read again (unless
it was modified within two seconds of that scan: a change in the same clock tick would look
unchanged, as git's "racily clean" entries). Symbolic links are followed only to files inside
the folder; every file is opened without following a link in its last part and its opened
path checked to be inside the folder, so a link swapped in meanwhile reads nothing outside.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any, BinaryIO

from core.settings import Settings
from pipelines.sources.errors import SourceError
from pipelines.sources.listing import (
    Entry,
    Listing,
    Scratch,
    copy_hashed,
    hash_stream,
    name_problem,
)
from pipelines.sources.spec import SourceSpec

RACY_NS = 2_000_000_000
# Files looked at (taken or not) per file a source may hold: a walk stops at this many.
WALK_FACTOR = 10


def too_big(size: int, limit: int) -> str:
    """The catalog's own rejection of a file above COGMILL_MAX_FILE_BYTES."""
    return (
        f"file is {size} bytes, above the limit of {limit} "
        "(raise COGMILL_MAX_FILE_BYTES to accept it)"
    )


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def open_inside(path: str, root: str) -> BinaryIO:
    """A regular file opened for reading, refused (SourceError) unless it is inside `root`."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise SourceError(f"cannot open it: {err.strerror or err}") from err
    try:
        proc = f"/proc/self/fd/{fd}"
        opened = os.readlink(proc) if os.path.exists(proc) else os.path.realpath(path)
        if not inside(opened, root):
            raise SourceError("it resolves outside the source folder")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceError("not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class FolderScan:
    """One scan of a folder source against its cursor (`{"files": {path: [size, mtime_ns,
    sha256]}, "scanned_ns": ...}`)."""

    def __init__(self, spec: SourceSpec, settings: Settings, scratch: Scratch) -> None:
        self.spec, self.settings, self.scratch = spec, settings, scratch
        try:
            self.root = str(Path(spec.location).resolve(strict=True))
        except OSError as err:
            raise SourceError(f"the folder {spec.location} cannot be read: {err}") from err
        if not os.path.isdir(self.root):
            raise SourceError(f"{spec.location} is not a folder")

    def listing(self, cursor: dict[str, Any]) -> Listing:
        started = time.time_ns()
        trusted_before = int(cursor.get("scanned_ns", 0)) - RACY_NS
        known: dict[str, list[Any]] = cursor.get("files", {})
        listing = Listing(cursor={"files": {}, "scanned_ns": started})
        taken = walked = 0
        most = self.settings.sync_max_files
        for folder, names, files in os.walk(self.root, followlinks=False):
            rel_folder = os.path.relpath(folder, self.root)
            rel_folder = "" if rel_folder == "." else rel_folder.replace(os.sep, "/") + "/"
            names[:] = self._folders(folder, rel_folder, sorted(names), listing)
            for name in sorted(files):
                walked += 1
                if walked > most * WALK_FACTOR:
                    raise self._too_many(walked)
                rel = rel_folder + name
                if name.startswith(".") or not self.spec.filter.takes(rel):
                    continue
                taken += 1
                if taken > most:
                    raise self._too_many(taken)
                self._file(os.path.join(folder, name), rel, known, trusted_before, listing)
        return listing

    def _too_many(self, count: int) -> SourceError:
        return SourceError(
            f"the folder holds more than {self.settings.sync_max_files} files to sync (counted "
            f"{count}); narrow it with include/exclude globs or raise COGMILL_SYNC_MAX_FILES"
        )

    def _folders(self, folder: str, rel: str, names: list[str], listing: Listing) -> list[str]:
        """The subfolders to walk: not hidden, not excluded, not a link (reported)."""
        kept = []
        for name in names:
            if name.startswith(".") or self.spec.filter.prunes(rel + name):
                continue
            if os.path.islink(os.path.join(folder, name)):
                listing.rejected.append((rel + name, "a symbolic link to a folder: not followed"))
                continue
            kept.append(name)
        return kept

    def _file(
        self, path: str, rel: str, known: dict[str, list[Any]], trusted_before: int, out: Listing
    ) -> None:
        settings = self.settings
        if problem := name_problem(rel, settings.sync_max_path_chars):
            out.rejected.append((rel[:80], problem))
            return
        target = os.path.realpath(path) if os.path.islink(path) else path
        if not inside(target, self.root):
            out.rejected.append((rel, "a symbolic link out of the source folder: not followed"))
            return
        try:
            info = os.stat(target, follow_symlinks=False)
        except OSError as err:
            out.rejected.append((rel, f"cannot read it: {err.strerror or err}"))
            return
        if not stat.S_ISREG(info.st_mode):
            out.rejected.append((rel, "not a regular file"))
            return
        if info.st_size > settings.max_file_bytes:
            out.rejected.append((rel, too_big(info.st_size, settings.max_file_bytes)))
            return
        cached = known.get(rel)
        if (
            cached is not None
            and cached[:2] == [info.st_size, info.st_mtime_ns]
            and info.st_mtime_ns < trusted_before
        ):
            digest = str(cached[2])
        else:
            try:
                with open_inside(target, self.root) as stream:
                    digest = hash_stream(stream)
            except SourceError as err:
                out.rejected.append((rel, str(err)))
                return
        out.cursor["files"][rel] = [info.st_size, info.st_mtime_ns, digest]
        out.entries[rel] = Entry(rel, digest, lambda: self._copy(target), info.st_size)

    def _copy(self, target: str) -> Path:
        copy = self.scratch.path()
        with open_inside(target, self.root) as stream:
            copy_hashed(stream, copy)
        return copy
