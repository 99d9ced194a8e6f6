"""A worker opens its stores before its first step; one that cannot be opened yet waits."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.ports import StoreError
from core.settings import Settings
from runtime import Runtime


def test_open_opens_what_ingestion_uses(tmp_path: Path) -> None:
    runtime = Runtime(Settings(home=tmp_path))
    try:
        runtime.open()
        opened = set(vars(runtime))
    finally:
        runtime.close()
    assert {"state", "graph", "vectors", "lexical", "embedder", "extractor"} <= opened


def test_a_store_still_down_is_logged_and_opened_at_first_use(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing listens on port 1: the graph cannot be opened, the rest still is.
    runtime = Runtime(Settings(home=tmp_path, neo4j_uri="bolt://127.0.0.1:1"))
    try:
        with caplog.at_level(logging.WARNING, logger="cogmill.runtime"):
            runtime.open()
        assert "graph" not in vars(runtime) and "state" in vars(runtime)
        assert "not opened ahead of use: graph" in caplog.text
        with pytest.raises(StoreError, match="127.0.0.1:1"):
            runtime.graph.count("any")  # first use tries again, and says why it cannot
    finally:
        runtime.close()
