"""Source code: one element per top-level unit (a function, a class, a run of statements).

Python is split with `ast` (decorators and leading comments stay with their definition).
Other languages, and Python that does not parse, are split by layout: a new unit starts
where a line at the outermost indentation follows a blank line or a more indented line,
unless it closes a bracket. `split_blocks` applies the same rule one level deeper, which is
how the chunker cuts a class too large for one chunk into its methods.
"""

from __future__ import annotations

import ast
import warnings

from pipelines.formats.base import Source
from pipelines.formats.text import read_text
from pipelines.models import Element

LANGUAGES = {
    "py": "python",
    "pyi": "python",
    "js": "javascript",
    "mjs": "javascript",
    "cjs": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "tsx": "typescript",
    "java": "java",
    "kt": "kotlin",
    "kts": "kotlin",
    "scala": "scala",
    "go": "go",
    "rs": "rust",
    "c": "c",
    "h": "c",
    "cc": "cpp",
    "cpp": "cpp",
    "cxx": "cpp",
    "hpp": "cpp",
    "hh": "cpp",
    "cs": "csharp",
    "swift": "swift",
    "rb": "ruby",
    "php": "php",
    "sh": "shell",
    "bash": "shell",
    "zsh": "shell",
    "sql": "sql",
    "r": "r",
    "lua": "lua",
    "pl": "perl",
}
_CLOSERS = ("}", ")", "]", "end", "fi", "done", "esac")
_SMALL_STATEMENTS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Expr)


def partition_code(source: Source, language: str) -> list[Element]:
    """Top-level units of a source file as code elements."""
    text = read_text(source).replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    units = _python_units(text) if language == "python" else None
    if units is None:
        units = split_blocks(text, level=0)
    return [Element(kind="code", text=unit.strip("\n")) for unit in units if unit.strip()]


def _python_units(text: str) -> list[str] | None:
    """Top-level definitions, each with its decorators and leading comments; None if invalid."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.split("\n")
    units: list[str] = []
    start, small_run = 0, False
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        first = _leading_comments(lines, first, start)
        small = isinstance(node, _SMALL_STATEMENTS)
        if not (small and small_run) and first > start:
            units.append("\n".join(lines[start:first]))
            start = first
        if not small:  # a definition ends its own unit
            units.append("\n".join(lines[start : node.end_lineno]))
            start = node.end_lineno or start
        small_run = small
    units.append("\n".join(lines[start:]))
    return [unit for unit in units if unit.strip()]


def _leading_comments(lines: list[str], first: int, floor: int) -> int:
    """The first line of the comment block right above line `first` (not above `floor`)."""
    while first > floor and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return first


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def split_blocks(text: str, level: int | None = None) -> list[str]:
    """Units of `text` at one indentation level (the outermost level that gives two or more
    units when `level` is None): each starts at a line of that level after a blank line or
    after a more indented line, unless it closes a bracket or block."""
    lines = text.split("\n")
    indents = sorted({_indent(line) for line in lines if line.strip()})
    for candidate in [level] if level is not None else indents:
        blocks = _split_at(lines, candidate)
        if len(blocks) > 1 or level is not None:
            return blocks
    return [text]


def _split_at(lines: list[str], level: int) -> list[str]:
    blocks: list[list[str]] = [[]]
    previous_blank, previous_indent = False, level
    for line in lines:
        stripped = line.strip()
        starts = (
            stripped
            and _indent(line) == level
            and (previous_blank or previous_indent > level)
            and not stripped.startswith(_CLOSERS)
            and any(s.strip() for s in blocks[-1])
        )
        if starts:
            blocks.append([])
        blocks[-1].append(line)
        previous_blank = not stripped
        if stripped:
            previous_indent = _indent(line)
    return ["\n".join(block) for block in blocks if any(s.strip() for s in block)]
