"""Write docs/configuration.md from core/settings.py: every setting, its type, default and bounds.

    .venv/bin/python tools/configuration_doc.py           # rewrite docs/configuration.md
    .venv/bin/python tools/configuration_doc.py --check   # exit 1 when it is stale

A setting's description is the comment block above it in core/settings.py (a block covers the
fields that follow it up to the next blank line or comment), else its `Field(description=...)`.
A comment line of a few plain words after a blank line ("# Stores") starts a section. Types,
defaults and bounds come from the `Settings` model itself, so the page cannot disagree with it.
tests/unit/test_configuration_doc.py fails when the committed page is stale.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import annotated_types

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "core" / "settings.py"
TARGET = ROOT / "docs" / "configuration.md"
PREFIX = "COGMILL_"
TITLE = re.compile(r"^[A-Z][A-Za-z]*(?: [A-Za-z]+){0,3}$")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.settings import Settings  # noqa: E402 - after the repository is on sys.path

INTRO = """\
# Configuration

<!-- Generated from core/settings.py: do not edit by hand. Change the comments or fields
     there, then run `.venv/bin/python tools/configuration_doc.py`. -->

Every setting is an environment variable named `COGMILL_<NAME>`, read once when a `cogmill`
process starts; a `.env` file in the working directory is read too (the environment wins).
Lists are JSON (`COGMILL_API_TRUSTED_HOSTS='["localhost","api"]'`), booleans `true`/`false`.
A value of the wrong type or outside its bounds stops every `cogmill` command before it does
anything, with one line per setting saying what is wrong, and exit code 2.

The mode follows from the settings alone: with no broker, Neo4j or Qdrant URL everything is
embedded under `COGMILL_HOME`; `COGMILL_BROKER_URL`, `COGMILL_REDIS_URL`, `COGMILL_NEO4J_URI` and
`COGMILL_QDRANT_URL` move the queue, the state, the graph and the vectors to servers
(docs/operations.md). Secrets (`*_PASSWORD`, `*_API_KEY`, `METRICS_TOKEN`) are never logged or
shown in errors.
"""


@dataclass
class Group:
    """Fields that share one comment block (or none)."""

    comment: str = ""
    fields: list[str] = field(default_factory=list)


@dataclass
class Section:
    title: str
    groups: list[Group] = field(default_factory=list)


def settings_class(tree: ast.Module) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Settings":
            return node
    raise SystemExit(f"{SOURCE}: no class Settings")


def read_sections(source: str) -> list[Section]:
    """The class body's sections and comment groups, in source order."""
    lines = source.splitlines()
    cls = settings_class(ast.parse(source))
    starts = {}
    for node in cls.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        name = target.id if isinstance(target, ast.Name) else None
        if isinstance(name, str) and name != "model_config":
            starts[node.lineno] = (name, node.end_lineno or node.lineno)
    end = max(line for _, line in starts.values())
    sections = [Section("General")]
    comment: list[str] = []
    group: Group | None = None
    after_blank = True
    number = cls.body[0].lineno
    while number <= end:
        text = lines[number - 1].strip()
        if number in starts:
            name, last = starts[number]
            if group is None:
                group = Group(" ".join(comment))
                sections[-1].groups.append(group)
                comment = []
            group.fields.append(name)
            number, after_blank = last + 1, False
            continue
        if not text:
            group, after_blank = None, True
        elif text.startswith("#"):
            words = text.lstrip("#").strip()
            if after_blank and not comment and TITLE.match(words):
                sections.append(Section(words))
            else:
                comment.append(words)
            group, after_blank = None, False
        number += 1
    return [s for s in sections if s.groups]


def type_name(annotation: Any) -> str:
    """A setting's type in words: int, float, bool, string, path, list, one of ...; optional."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return f"{type_name(inner[0])}, optional"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"JSON list of {type_name(args[0])}"
    names = {str: "string", int: "int", float: "float", bool: "bool", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def bounds(metadata: list[Any]) -> str:
    """`1 … 64`, `≥ 0`, `> 0`, `≤ 10 items`, or empty."""
    low = high = ""
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"{number(typing.cast(float, item.ge))}"
        elif isinstance(item, annotated_types.Gt):
            low = f"> {number(typing.cast(float, item.gt))}"
        elif isinstance(item, annotated_types.Le):
            high = f"{number(typing.cast(float, item.le))}"
        elif isinstance(item, annotated_types.Lt):
            high = f"< {number(typing.cast(float, item.lt))}"
        elif isinstance(item, annotated_types.MaxLen):
            high = f"≤ {item.max_length} items"
    if low and high and not low.startswith(">") and not high.startswith(("<", "≤")):
        return f"{low} … {high}"
    if low and not low.startswith(">"):
        low = f"≥ {low}"
    if high and high[0].isdigit():
        high = f"≤ {high}"
    return ", ".join(part for part in (low, high) if part)


UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
SPANS = ((86_400, "day"), (3600, "hour"))


def default(name: str, value: Any) -> str:
    """The default as one would write it in the environment, with a reading aid for sizes."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return f"`{json.dumps(value)}`"
    if isinstance(value, str | Path):
        return f"`{value}`" if str(value) else "empty"
    text = number(value).replace(",", "")
    aid = ""
    if value and name.endswith("_bytes"):
        aid = next((f"{value // size} {unit}" for size, unit in UNITS if value % size == 0), "")
    elif name.endswith("_seconds"):
        for size, unit in SPANS:
            if value >= size and value % size == 0:
                count = int(value // size)
                aid = f"{count} {unit}{'s' if count > 1 else ''}"
                break
    return f"`{text}` ({aid})" if aid else f"`{text}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").strip() or "—"


def row(name: str) -> str:
    info = Settings.model_fields[name]
    return (
        f"| `{PREFIX}{name.upper()}` | {cell(type_name(info.annotation))} | "
        f"{cell(default(name, info.default))} | {cell(bounds(info.metadata))} |"
    )


HEAD = "| variable | type | default | bounds | description |\n|---|---|---|---|---|"


def described(name: str, comment: str) -> str:
    """A field's description: its comment block, else its Field description."""
    return comment or Settings.model_fields[name].description or ""


def render() -> str:
    """The whole page: one table per section; a comment shared by several fields describes the
    first of them, and the others point up to it."""
    out = [INTRO]
    documented = set()
    for section in read_sections(SOURCE.read_text(encoding="utf-8")):
        rows = []
        for group in section.groups:
            for index, name in enumerate(group.fields):
                text = described(name, group.comment if index == 0 else "")
                if index and group.comment:
                    text = f"↑ {text}"
                rows.append(f"{row(name)} {cell(text)} |")
            documented.update(group.fields)
        out.append(f"## {section.title}\n\n" + "\n".join([HEAD, *rows]) + "\n")
    validator = Settings._consistent.__doc__ or ""
    out.append("## Rules between settings\n\n" + " ".join(validator.split()) + "\n")
    missing = set(Settings.model_fields) - documented
    if missing:
        raise SystemExit(f"settings not found in {SOURCE}: {sorted(missing)}")
    return "\n".join(out)


def undescribed(source: Path = SOURCE) -> list[str]:
    """Settings with neither a comment block nor a Field description."""
    names = []
    for section in read_sections(source.read_text(encoding="utf-8")):
        for group in section.groups:
            for name in group.fields:
                if not group.comment and not Settings.model_fields[name].description:
                    names.append(name)
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args()
    page = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != page:
            print(f"{TARGET.relative_to(ROOT)} is stale: run tools/configuration_doc.py")
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(page, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
