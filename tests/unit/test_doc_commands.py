"""Every shell block of the docs runs as written, or says it is an excerpt.

A block a test runs is marked `<!-- test: NAME -->` or `<!-- tour... -->` on the line before
its fence. Any other block with a placeholder in a command (`PATH...`, `D`, `KEY_ID`,
`redis://:PASSWORD@...`) cannot be pasted as it is, so the paragraph before it, its first
line or the paragraph after it must say "excerpt".
"""

from __future__ import annotations

import re
from pathlib import Path

from retrieval.models import SearchType

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```\n?", re.M | re.S)
# An upper-case word standing alone: not a $VARIABLE, a NAME= assignment, nor part of a word.
PLACEHOLDER = re.compile(r"(?<![\w$/{-])([A-Z][A-Z0-9_]*(?:\.\.\.)?)(?![\w=(}-])")
LITERALS = {kind.value for kind in SearchType} | {"UTC"}


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def placeholders(code: str) -> list[str]:
    """The placeholders in a block's commands (comments left out)."""
    found = []
    for line in code.splitlines():
        command = re.sub(r"(^|\s)#.*$", "", line)
        found += [word for word in PLACEHOLDER.findall(command) if word not in LITERALS]
    return found


def paragraph(text: str) -> str:
    """The first paragraph of `text` (up to a blank line)."""
    return text.strip().split("\n\n", 1)[0]


def unmarked(text: str) -> list[tuple[int, list[str]]]:
    """(line, placeholders) of each block with placeholders that neither a test runs nor the
    text calls an excerpt."""
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip()
        if before.splitlines()[-1].startswith(("<!-- test:", "<!-- tour")):
            continue
        near = paragraph(before[::-1])[::-1] + match.group(1) + paragraph(text[match.end() :])
        words = placeholders(match.group(1))
        if words and "excerpt" not in near.lower():
            found.append((text.count("\n", 0, match.start()) + 1, words))
    return found


def test_every_block_with_placeholders_says_it_is_an_excerpt() -> None:
    problems = [
        f"{page.relative_to(ROOT)}:{line}: {', '.join(words)}"
        for page in pages()
        for line, words in unmarked(page.read_text(encoding="utf-8"))
    ]
    assert not problems, "blocks with placeholders not called excerpts:\n" + "\n".join(problems)


def test_the_check_finds_placeholders_and_excerpts() -> None:
    block = "```bash\ncogmill keys revoke KEY_ID   # NOT this\ncogmill search x -t CHUNKS\n```\n"
    assert unmarked("Revoke it:\n\n" + block) == [(3, ["KEY_ID"])]
    assert unmarked("Revoke it:\n\n" + block + "\n(An excerpt.)\n") == []
    assert unmarked("<!-- test: revoke -->\n" + block) == []
    assert placeholders("export COGMILL_HOME=$HOME/x URL=${URL}\ncogmill add PATH... -d D") == [
        "PATH...",
        "D",
    ]
