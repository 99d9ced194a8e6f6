"""The wheel holds every package the server runs and the typed client, built from exactly
what deploy/Dockerfile copies into the image: a package missing from its COPY lines (as
cogmill_client once was) is missing from the image's install."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")


def copied_paths() -> list[str]:
    """The sources of the Dockerfile's COPY lines (build context paths)."""
    text = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    paths = []
    for line in re.findall(r"^COPY\s+(?!--from)(.+)$", text, flags=re.MULTILINE):
        *sources, _dest = line.split()
        paths.extend(s for s in sources if not s.startswith("--"))
    return paths


@pytest.mark.slow
def test_the_image_s_wheel_holds_the_server_and_the_client(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for path in copied_paths():
        source = ROOT / path
        if source.is_dir():
            shutil.copytree(source, context / path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (context / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, context / path)
    built = subprocess.run(
        [str(UV), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("cogmill-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = [p.rstrip("*") for p in declared["packages"]["find"]["include"]]
    for package in packages:
        assert f"{package}/__init__.py" in names, f"{package} is not in the wheel"
    for path in (
        "cogmill_client/client.py",
        "cogmill_client/models.py",
        "runtime/__init__.py",
        "api/http/ui/app.js",
        "api/sample_corpus/london.md",
    ):
        assert path in names, path
    assert any(n.startswith("core/llm/prompts/") and n.endswith(".txt") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "cogmill = api.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
