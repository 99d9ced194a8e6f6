"""A tiny run of the changing-facts bench (bench/changing_facts.py), so it cannot rot: both
settings ingested, every question asked of every search, the table printed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # last: shadows nothing
import changing_facts  # noqa: E402
from changing_facts_corpus import generate  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_tiny_run_measures_every_search_on_both_settings(tmp_path: Path) -> None:
    corpus = generate(seed=3, per_kind=1)
    results = changing_facts.run(corpus, tmp_path)
    assert set(results) == {
        "routed supersession on",
        "GRAPH_COMPLETION supersession on",
        "CHUNKS",
        "routed supersession off",
        "GRAPH_COMPLETION supersession off",
    }
    for figures in results.values():
        assert 0 <= figures["current"] <= 1 and 0 <= figures["as_of"] <= 1
        assert figures["cpu_s"] > 0
    on, off = results["routed supersession on"], results["routed supersession off"]
    assert on["current"] >= off["current"]
    assert "| CHUNKS |" in changing_facts.table(results)
