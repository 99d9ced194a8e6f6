"""Which files of a source a sync takes: include and exclude globs over relative paths.

A pattern without `/` matches a file's name in any folder (`*.md`); one with `/` matches the
whole relative path from the source's root (`docs/**/*.md`), where `**` stands for any number
of folders (zero or more) and `*`, `?` and `[...]` never cross a `/`. A file is taken when it
matches an include pattern (any file when there is none) and no exclude pattern matches it or
one of its folders.

Matching goes folder by folder (`fnmatch` within a name, a small table over the names for
`**`), so a pattern of many stars costs time in proportion to the path, not exponentially.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pipelines.sources.errors import SourceError


def check_globs(patterns: list[str], what: str, most: int, chars: int) -> list[str]:
    """The patterns when within the bounds (`most` of them, each at most `chars` long, no empty
    or absolute one); SourceError says which is out and what to do."""
    if len(patterns) > most:
        raise SourceError(
            f"{len(patterns)} {what} patterns given, more than the {most} allowed "
            "(COGMILL_SYNC_MAX_GLOBS); combine them, e.g. '*.md' instead of one per file"
        )
    for pattern in patterns:
        if len(pattern) > chars:
            raise SourceError(
                f"{what} pattern {pattern[:40]!r}... is {len(pattern)} characters, more than "
                f"the {chars} allowed (COGMILL_SYNC_MAX_GLOB_CHARS)"
            )
        if not pattern.strip() or pattern.startswith("/") or "\x00" in pattern:
            raise SourceError(
                f"{what} pattern {pattern!r} is empty or absolute; give a pattern relative to "
                "the source's root, e.g. '*.md' or 'docs/**/*.txt'"
            )
    return patterns


@functools.lru_cache(maxsize=1024)
def _split(pattern: str) -> tuple[str, ...]:
    return tuple(part for part in pattern.split("/") if part)


def matches(pattern: str, path: str) -> bool:
    """Whether a relative POSIX path matches one pattern (see the module docstring)."""
    parts = tuple(path.split("/"))
    if "/" not in pattern.strip("/"):
        return fnmatchcase(parts[-1], pattern.strip("/"))
    return _match(_split(pattern), parts)


def _match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Names against pattern parts: a table of which suffixes match which (len x len)."""
    # can[i][j]: pattern[i:] matches parts[j:]; filled from the ends.
    rows, cols = len(pattern), len(parts)
    can = [[False] * (cols + 1) for _ in range(rows + 1)]
    can[rows][cols] = True
    for i in range(rows - 1, -1, -1):
        for j in range(cols, -1, -1):
            if pattern[i] == "**":
                can[i][j] = can[i + 1][j] or (j < cols and can[i][j + 1])
            else:
                can[i][j] = j < cols and fnmatchcase(parts[j], pattern[i]) and can[i + 1][j + 1]
    return can[0][0]


@dataclass(frozen=True)
class PathFilter:
    """The include and exclude patterns of a source."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def takes(self, path: str) -> bool:
        """Whether the file at this relative POSIX path belongs to the source: an exclude
        pattern matching the file or one of its folders leaves it out (as .gitignore does)."""
        if self.include and not any(matches(p, path) for p in self.include):
            return False
        parts = path.split("/")
        return not any(self.prunes("/".join(parts[:n])) for n in range(1, len(parts) + 1))

    def prunes(self, folder: str) -> bool:
        """Whether an exclude pattern matches this relative path (a folder: a walk need not
        enter it, nothing under it is taken)."""
        return any(matches(p, folder) for p in self.exclude)
