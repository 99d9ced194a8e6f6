"""Every bench imports its siblings as `bench.NAME`: a bare `import corpora` resolves only when
the file runs as a script (Python puts bench/ on sys.path), so `python -m bench.NAME` and any
bench importing that one fail with ModuleNotFoundError."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"
# The peers' runners run in the peers' own venvs, where cogmill is not installed: they put
# their own folder on sys.path and import treecpu from there on purpose.
OWN_VENV = {"peers/run_cognee.py", "peers/run_lightrag.py"}


def sibling_names() -> set[str]:
    """Every module or package name a bench could mistake for a top-level one."""
    names = set()
    for path in BENCH.rglob("*.py"):
        names.add(path.stem)
        names.update(part for part in path.relative_to(BENCH).parts[:-1])
    return names - {"__init__", "__main__"}


def bare_imports(path: Path, siblings: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        found += [f"line {node.lineno}: {top}" for top in tops if top in siblings]
    return found


def test_benches_import_their_siblings_as_bench_modules() -> None:
    siblings = sibling_names()
    assert {"corpora", "common", "loadtest", "resync"} <= siblings
    offenders = {
        str(path.relative_to(BENCH)): bare
        for path in sorted(BENCH.rglob("*.py"))
        if str(path.relative_to(BENCH)) not in OWN_VENV and (bare := bare_imports(path, siblings))
    }
    assert not offenders, f"import these as bench.NAME: {offenders}"


def test_the_check_finds_a_bare_sibling_import(tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("import sys\nfrom corpora import pool\nimport bench.common\n")
    assert bare_imports(script, {"corpora", "common"}) == ["line 2: corpora"]
