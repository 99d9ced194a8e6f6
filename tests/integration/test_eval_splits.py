"""`cogmill eval --split tune|test` and the AUTO row (the routed search), on the tiny bench of
test_eval.py: q0 (gold {Bread}) is the `tune` split, q1 (gold {Stars, Roses}) the `test` one.

Hand-computed CHUNKS recall (see test_eval.py): q0 finds Bread first (1 at every k); q1 has
Stars and its duplicate in its top 2 (1/2 at k=2) and all four passages by k=5 (1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from retrieval.evaluation import AUTO, BenchDataError, eval_type, load_bench
from retrieval.models import SearchType
from tests.integration.test_eval import write_bench


def test_splits_are_the_even_and_the_odd_questions(tmp_path: Path) -> None:
    bench = load_bench("musique", write_bench(tmp_path / "data"))
    tune, test = bench.split("tune"), bench.split("test")
    assert [q.gold for q in tune.questions] == [frozenset({"Bread"})]
    assert [q.gold for q in test.questions] == [frozenset({"Stars", "Roses"})]
    assert bench.split("all") is bench and tune.passages == bench.passages
    with pytest.raises(BenchDataError, match="unknown split 'dev'; use one of all, tune, test"):
        bench.split("dev")


def test_eval_types_accept_auto_in_any_case_and_name_the_choices() -> None:
    assert eval_type("auto") == AUTO and eval_type("graph_ppr") is SearchType.GRAPH_PPR
    with pytest.raises(ValueError, match="cannot be evaluated; use one of CHUNKS, .*AUTO"):
        eval_type("BEST")


@pytest.mark.slow
def test_each_split_and_the_auto_row(tmp_path: Path) -> None:
    data, home = write_bench(tmp_path / "data"), tmp_path / "home"
    base = ["eval", "--json", "--bench", "musique", "--data", str(data), "--home", str(home)]
    base += ["--types", "CHUNKS", "--types", "auto"]
    reports = {}
    for split in ("tune", "test"):
        result = CliRunner().invoke(app, [*base, "--split", split])
        assert result.exit_code == 0, result.output
        reports[split] = json.loads(result.stdout.strip().splitlines()[-1])["musique"]
    assert reports["tune"]["CHUNKS"] == {"recall@2": 1.0, "recall@5": 1.0, "recall@10": 1.0}
    assert reports["test"]["CHUNKS"] == {"recall@2": 0.5, "recall@5": 1.0, "recall@10": 1.0}
    for report in reports.values():
        assert set(report) == {"CHUNKS", "AUTO"}
        assert report["AUTO"]["recall@10"] == 1.0  # four passages: the routed search finds all
    table = CliRunner().invoke(app, [*base[:1], *base[2:], "--split", "tune"])
    assert table.exit_code == 0, table.output
    assert "| musique | AUTO |" in table.stdout
    assert "musique AUTO routed: GRAPH_PPR 1" in table.stdout  # q0 has no cue: the default
    bad = CliRunner().invoke(app, [*base, "--split", "dev"])
    assert bad.exit_code == 2 and "unknown split 'dev'" in bad.output
