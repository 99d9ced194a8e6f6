"""docs/configuration.md is what tools/configuration_doc.py makes of core/settings.py today."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def load_tool() -> ModuleType:
    # By path: `tools` is not a package of the distribution, and the name is a common one.
    spec = importlib.util.spec_from_file_location(
        "configuration_doc", ROOT / "tools" / "configuration_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_current() -> None:
    tool = load_tool()
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == tool.render(), (
        "docs/configuration.md is stale: run .venv/bin/python tools/configuration_doc.py"
    )


def test_every_setting_is_on_the_page_with_its_type_default_and_bounds() -> None:
    from core.settings import Settings

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = {ln.split("`")[1]: ln for ln in page.splitlines() if ln.startswith("| `COGMILL_")}
    assert set(rows) == {f"COGMILL_{name.upper()}" for name in Settings.model_fields}
    assert "| int | `32` | 1 … 10,000 | Documents per batch" in rows["COGMILL_BATCH_SIZE"]
    assert "`209715200` (200 MiB) | ≥ 1 |" in rows["COGMILL_MAX_FILE_BYTES"]
    assert (
        "| JSON list of float | `[15, 60, 240]` | ≤ 10 items |"
        in (rows["COGMILL_LLM_OUTAGE_PAUSES_SECONDS"])
    )
    assert "one of `auto`, `required` | `auto` |" in rows["COGMILL_AUTH"]


def test_every_setting_says_what_it_is() -> None:
    assert load_tool().undescribed() == [], "give these settings a comment in core/settings.py"


def test_a_changed_default_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.settings import Settings

    tool = load_tool()
    before = tool.render()
    monkeypatch.setattr(Settings.model_fields["batch_size"], "default", 33)
    assert tool.render() != before


def test_a_setting_without_a_description_is_found(tmp_path: Path) -> None:
    tool = load_tool()
    source = (ROOT / "core" / "settings.py").read_text(encoding="utf-8")
    marker = "    # Texts per call of the local embedder.\n"
    assert marker in source
    changed = tmp_path / "settings.py"
    changed.write_text(source.replace(marker, "\n"), encoding="utf-8")
    assert tool.undescribed(changed) == ["embed_batch_size"]
