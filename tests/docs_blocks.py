"""The code blocks of the docs that tests run or check: each is marked by an HTML comment
`<!-- test: NAME -->` on the line before its fence, so the test finds it by name and the page
shows it as any other block."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def block(page: str, name: str) -> str:
    """The text of the fenced block marked `name` in `page` (a path under docs/)."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    marker = re.escape(f"<!-- test: {name} -->")
    found = re.search(marker + r"\s*\n```[\w-]*\n(.*?)\n```", text, flags=re.DOTALL)
    assert found, f"docs/{page} has no block marked `<!-- test: {name} -->`"
    return found.group(1) + "\n"


def blocks(page: str, prefix: str) -> dict[str, str]:
    """Every marked block of `page` whose name starts with `prefix`, by name."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    names = re.findall(r"<!-- test: (" + re.escape(prefix) + r"[\w.-]*) -->", text)
    return {name: block(page, name) for name in names}
