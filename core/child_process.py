"""Running one of our modules in a child interpreter (parsers of untrusted input, with bounds)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])  # the folder holding the `core` package


def module_command(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment for `python -m module args` in a child that imports this
    checkout's packages, installed or not."""
    path = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)
    return [sys.executable, "-m", module, *args], {**os.environ, "PYTHONPATH": path}
