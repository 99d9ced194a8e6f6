"""Every file or folder of the repository that the docs and the code cite exists.

Docs, docstrings and comments name files (`core/stores/neo4j/graph.py`, `docs/operations.md`)
so a reader can open them; a move that leaves a stale name sends the reader nowhere. Module
paths written with dots and `NAME`-style placeholders are not checked.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = "api|core|pipelines|retrieval|runtime|workers|tests|bench|deploy|docs|tools|cogmill_client"
# A file with a known extension, or a folder written with its trailing slash.
CITED = re.compile(
    rf"(?<![\w./-])((?:{TOP})/(?:[\w.-]+/)*(?:[\w-]+\.(?:py|md|sh|toml|yml|yaml|json|txt|html|js|css|png|xml|java)\b|)(?![\w-]))"
)


def tracked_texts() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "*.md", "*.py", "*.toml", "*.sh", "*.yml", "Makefile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in names]


def cited_paths(text: str) -> set[str]:
    found = set()
    for match in CITED.finditer(text):
        path = match.group(1).rstrip("/")
        if not re.search(r"/[A-Z]+(\.|$)", path):  # a placeholder: bench/NAME.py
            found.add(path)
    return found


def exists(path: str) -> bool:
    return (ROOT / path).exists()


def test_every_cited_path_exists() -> None:
    missing = sorted(
        f"{file.relative_to(ROOT)}: {path}"
        for file in tracked_texts()
        if file.exists() and file != Path(__file__)  # its own examples cite missing paths
        for path in cited_paths(file.read_text(encoding="utf-8", errors="replace"))
        if not exists(path)
    )
    assert not missing, "these cite files that do not exist:\n" + "\n".join(missing)


def test_a_stale_citation_is_found() -> None:
    text = "see core/stores/graph_neo4j.py, docs/x.md and retrieval/ppr/; not 'acme:docs/d'"
    assert cited_paths(text) == {"core/stores/graph_neo4j.py", "docs/x.md", "retrieval/ppr"}
    assert not exists("core/stores/graph_neo4j.py")
    assert exists("core/stores/neo4j/graph.py") and exists("retrieval/ppr")
