"""`cogmill eval` on a tiny bench written here, in the real files' formats.

The corpus makes the dense ranking certain: each question is a passage's own text, and one
passage ("Stars again") repeats another's text under a second title, so it ties with it.
Hand-computed CHUNKS recall: q1 (gold {Bread}) finds Bread first: 1 at every k. q2 (gold
{Stars, Roses}) gets Stars and Stars again in its top 2, so 1/2 at k=2, and all four passages
by k=5: 1. Means: R@2 = 0.75, R@5 = R@10 = 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.services.evaluation import run_eval
from retrieval.evaluation import BenchDataError, load_bench, ranked_titles, recall_at
from retrieval.models import SearchResult, SearchType, Source

PASSAGES = {
    "Bread": "Sourdough bread is leavened by wild yeast and lactic acid bacteria in a starter.",
    "Stars": "A neutron star is the collapsed core of a massive star after a supernova.",
    "Stars again": "A neutron star is the collapsed core of a massive star after a supernova.",
    "Roses": "Garden roses are pruned in late winter, just before their buds begin to swell.",
}
QUESTIONS = [
    (PASSAGES["Bread"], ["Bread"]),
    (PASSAGES["Stars"], ["Stars", "Roses"]),
]
EXPECTED_CHUNKS = {"recall@2": 0.75, "recall@5": 1.0, "recall@10": 1.0}


def write_bench(folder: Path) -> Path:
    """Both benches' file formats, with the same passages and questions."""
    folder.mkdir(parents=True, exist_ok=True)
    musique_corpus = [{"title": t, "text": text} for t, text in PASSAGES.items()]
    musique = [
        {
            "id": f"q{i}",
            "question": question,
            "paragraphs": [
                {"idx": j, "title": t, "paragraph_text": text, "is_supporting": t in gold}
                for j, (t, text) in enumerate(PASSAGES.items())
            ],
        }
        for i, (question, gold) in enumerate(QUESTIONS)
    ]
    # HotpotQA: title -> sentences (joined as they are), gold from supporting_facts.
    hotpot_corpus = {t: [text[:20], text[20:]] for t, text in PASSAGES.items()}
    hotpot = [
        {"_id": f"q{i}", "question": q, "supporting_facts": [[t, 0] for t in gold]}
        for i, (q, gold) in enumerate(QUESTIONS)
    ]
    files = {
        "musique_train_corpus.json": musique_corpus,
        "musique_train.json": musique,
        "hotpotqa_train_corpus.json": hotpot_corpus,
        "hotpotqa_train.json": hotpot,
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder


def test_recall_counts_distinct_documents_in_rank_order() -> None:
    def result(doc: str) -> SearchResult:
        return SearchResult(
            text="", score=1.0, sources=[Source(document_id=doc, document_name=doc, chunk_id=doc)]
        )

    titles = {"a": "A", "b": "B", "c": "C"}
    ranked = ranked_titles([result("a"), result("a"), result("b"), result("c")], titles)
    assert ranked == ["A", "B", "C"]  # the repeated document counts once
    gold = frozenset({"A", "C"})
    assert recall_at(ranked, gold, 1) == 0.5
    assert recall_at(ranked, gold, 2) == 0.5
    assert recall_at(ranked, gold, 3) == 1.0


@pytest.mark.slow
def test_eval_json_has_the_shape_and_the_hand_computed_recall(tmp_path: Path) -> None:
    data = write_bench(tmp_path / "data")
    home = tmp_path / "home"
    args = ["eval", "--json", "--data", str(data), "--home", str(home)]
    args += ["--types", "CHUNKS", "--types", "GRAPH_PPR"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == {"musique", "hotpotqa"}
    for bench in report.values():
        assert set(bench) == {"CHUNKS", "GRAPH_PPR"}
        for figures in bench.values():
            assert set(figures) == {"recall@2", "recall@5", "recall@10"}
            assert all(0.0 <= value <= 1.0 for value in figures.values())
        assert bench["CHUNKS"] == EXPECTED_CHUNKS
        assert bench["GRAPH_PPR"]["recall@10"] == 1.0  # four passages: all are found

    # The same home again: nothing is ingested a second time.
    lines: list[str] = []
    again = run_eval(home, data, ["musique"], [SearchType.CHUNKS], progress=lines.append)
    assert any("cognify 0 new documents" in line for line in lines), lines
    assert again["musique"][SearchType.CHUNKS].as_json() == EXPECTED_CHUNKS


@pytest.mark.slow
def test_one_bench_and_a_table(tmp_path: Path) -> None:
    data = write_bench(tmp_path / "data")
    args = ["eval", "--bench", "musique", "--data", str(data), "--types", "CHUNKS"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "| musique | CHUNKS | 0.750 | 1.000 | 1.000 |" in result.stdout
    assert "hotpotqa" not in result.stdout


def test_missing_or_malformed_bench_files_say_what_to_pass(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "--bench", "musique", "--data", str(tmp_path)])
    assert result.exit_code == 2
    assert "musique_train_corpus.json" in result.output and "--data" in result.output
    data = write_bench(tmp_path / "data")
    (data / "musique_train.json").write_text(json.dumps([{"question": "q", "paragraphs": []}]))
    with pytest.raises(BenchDataError, match="has no gold passage"):
        load_bench("musique", data)
    (data / "musique_train.json").write_text(json.dumps([{"text": "no question field"}]))
    with pytest.raises(BenchDataError, match="expected a list of questions"):
        load_bench("musique", data)
