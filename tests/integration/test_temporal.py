"""The temporal pipeline and TEMPORAL search through real Celery worker threads and stores, on
both backends (embedded, Neo4j + Redis).

Offline (spaCy dates, local embedder) and with the test LLM server (events from the
`EventList` schema, answers from `Answer`).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from core.catalog import AddReport
from core.models.graph import Node
from core.models.jobs import Job
from core.models.vocabulary import AT, DURING, INVOLVES
from pipelines.classify import check_supported
from retrieval.models import SearchResult, SearchType
from retrieval.search import search
from retrieval.temporal import TemporalRetriever
from runtime import Runtime
from tests.backends import (
    Backend,
    embedded_only,
    succeeded,
)
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify

CORPUS = {
    "acme.txt": (
        "Acme Corp was founded by Alice Smith in March 2019.\n\n"
        "In 2016, Bob Jones opened a bakery in Lisbon.\n\n"
        "In the 1990s, Bob Jones worked for Globex in Berlin.\n\n"
        "Acme Corp signed the merger with Globex on 2019-03-11 in Paris."
    ),
    "city.txt": (
        "Carol Lee joined Acme Corp on 5 June 2016.\n\n"
        "Between 1910 and 1920 the city of Lisbon grew quickly.\n\n"
        "The harbour of Lisbon is deep. Every summer it is crowded."
    ),
    "tokyo.txt": "2019年3月、Acme Corpは東京に事務所を開いた。",
}


@pytest.fixture
def runtime_settings() -> dict[str, object]:
    return {"batch_size": 2}


@pytest.fixture
def hist(backend: Backend) -> str:
    """The test's dataset."""
    return backend.dataset("hist")


def add_corpus(rt: Runtime, folder: Path, dataset: str) -> None:
    rt.catalog.ensure_dataset(dataset)
    report = AddReport()
    folder.mkdir(exist_ok=True)
    for name, text in CORPUS.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        rt.catalog.add_file(dataset, path, name, report, check_supported)
    assert not report.rejected, report.rejected


def evidence(results: list[SearchResult]) -> list[str]:
    """The events TEMPORAL listed, in rank order (each passage leads with its own)."""
    return [line for result in results for line in result.evidence]


def labels(results: list[SearchResult]) -> list[str]:
    """The dates of those events."""
    return [line.split(":")[0] for line in evidence(results)]


def run(rt: Runtime, dataset: str, timeout: float = 120) -> Job:
    return succeeded(rt, cognify(rt, dataset, "temporal"), timeout)


def events(rt: Runtime, dataset: str) -> list[Node]:
    """The dataset's events in time order (by the stored epoch)."""
    found = rt.graph.find_nodes(dataset, "Event", limit=1000)
    return sorted(found, key=lambda n: (n.properties["epoch"], n.properties["text"]))


def involved(rt: Runtime, event: Node) -> set[str]:
    targets = [e.target for e in rt.graph.edges_of([event.id], names=[INVOLVES])]
    return {n.name for n in rt.graph.get_nodes(targets)}


def assert_involves_acme_and_alice(names: set[str]) -> None:
    # Entity resolution may store "Acme Corp" under a shorter canonical name ("Acme").
    assert "Alice Smith" in names and any(n.startswith("Acme") for n in names), names


def test_events_are_extracted_ordered_and_linked(
    runtime: Runtime, tmp_path: Path, hist: str
) -> None:
    add_corpus(runtime, tmp_path / "corpus", hist)
    run(runtime, hist)
    found = events(runtime, hist)
    labels = [e.properties["label"] for e in found]
    assert labels == [
        "1910 – 1920",
        "1990s",
        "2016",
        "2016-06-05",
        "2019-03",
        "2019-03",
        "2019-03-11",
    ]
    times = [e.properties["time"] for e in found]
    assert times == sorted(times)  # the ISO value sorts like the epoch
    by_text = {e.properties["text"]: e for e in found}
    founded = by_text["Acme Corp was founded by Alice Smith in March 2019."]
    assert_involves_acme_and_alice(involved(runtime, founded))
    assert "Tokyo" not in by_text and any("東京" in text for text in by_text)
    # Same month, same Timestamp node: the founding and the Tokyo office share it.
    [march] = runtime.graph.find_nodes(hist, "Timestamp", name="2019-03")
    at = runtime.graph.edges_of([march.id], names=[AT])
    assert len({e.source for e in at}) == 2
    assert march.properties["time"] == "2019-03-01" and march.properties["granularity"] == "month"
    [decade_range] = runtime.graph.find_nodes(hist, "Interval")
    assert runtime.graph.edges_of([decade_range.id], names=[DURING])
    assert decade_range.properties["start"] == "1910-01-01"
    # A superset of the default pipeline: the entity graph is written too.
    assert runtime.graph.count(hist).get("Entity", 0) >= 5
    assert runtime.vectors.count("Event_text", dataset=hist) == len(found)


def test_temporal_search_filters_by_the_question_time(
    runtime: Runtime, tmp_path: Path, hist: str
) -> None:
    add_corpus(runtime, tmp_path / "corpus", hist)
    run(runtime, hist)
    response = search(runtime.retrieval(), "what happened in 2016", [hist], SearchType.TEMPORAL)
    texts = evidence(response.results)
    assert len(texts) == 2, texts
    assert all("2016" in t for t in texts) and not any("1990s" in t for t in texts)
    assert {s.document_name for r in response.results if r.evidence for s in r.sources} == {
        "acme.txt",
        "city.txt",
    }
    assert response.results[0].evidence  # the passages with the question's events lead
    decade = search(runtime.retrieval(), "events in the 1990s", [hist], SearchType.TEMPORAL)
    assert labels(decade.results) == ["1990s"]
    before = search(runtime.retrieval(), "before 1950", [hist], SearchType.TEMPORAL)
    assert labels(before.results) == ["1910 – 1920"]
    japanese = search(runtime.retrieval(), "2019年3月", [hist], SearchType.TEMPORAL)
    assert set(labels(japanese.results)) == {"2019-03", "2019-03-11"}
    # "last 30 days" on a fixed today: the day inside it first, then the months overlapping it.
    retriever = TemporalRetriever(runtime.retrieval(), today=lambda: date(2019, 3, 20))
    recent = retriever.get_context("what happened in the last 30 days?", [hist], 10)
    assert labels(recent) == ["2019-03-11", "2019-03", "2019-03"]
    assert recent[0].score > recent[-1].score


@embedded_only  # the retriever's fallback; graph search has Neo4j tests of its own
def test_a_question_without_a_time_is_a_graph_search(
    runtime: Runtime, tmp_path: Path, hist: str
) -> None:
    add_corpus(runtime, tmp_path / "corpus", hist)
    run(runtime, hist)
    response = search(runtime.retrieval(), "Who founded Acme Corp?", [hist], SearchType.TEMPORAL)
    graph = search(runtime.retrieval(), "Who founded Acme Corp?", [hist], SearchType.GRAPH_PPR)
    assert response.results and [r.text for r in response.results] == [
        r.text for r in graph.results
    ]


def test_deleting_a_document_removes_its_events(
    runtime: Runtime, tmp_path: Path, hist: str
) -> None:
    add_corpus(runtime, tmp_path / "corpus", hist)
    run(runtime, hist)
    [doc] = runtime.graph.find_nodes(hist, "Document", name="city.txt")
    runtime.catalog.remove_document(hist, doc)
    labels = [e.properties["label"] for e in events(runtime, hist)]
    assert labels == ["1990s", "2016", "2019-03", "2019-03", "2019-03-11"]
    assert not runtime.graph.find_nodes(hist, "Interval")  # only city.txt used it
    assert runtime.vectors.count("Event_text", dataset=hist) == 5
    response = search(runtime.retrieval(), "in 2016", [hist], SearchType.TEMPORAL)
    assert evidence(response.results) == [
        "2016: In 2016, Bob Jones opened a bakery in Lisbon. (involves: Bob Jones, Lisbon)"
    ]


def test_with_an_llm_events_come_from_the_model(
    backend: Backend, tmp_path: Path, hist: str
) -> None:
    with LLMTestServer() as llm:
        settings = {"llm_base_url": llm.base_url, "embedding_base_url": llm.base_url}
        with backend.runtime(**settings, embedding_dim=64) as rt:
            add_corpus(rt, tmp_path / "corpus", hist)
            run(rt, hist)
            labels = [e.properties["label"] for e in events(rt, hist)]
            # The server dates each sentence by its first "[Month] year" (not the Japanese one).
            assert labels == ["1910", "1990s", "2016", "2016-06", "2019", "2019-03"]
            founded = next(e for e in events(rt, hist) if "founded" in e.properties["text"])
            assert_involves_acme_and_alice(involved(rt, founded))
            calls = llm.calls()
            answer = search(rt.retrieval(), "What happened in 2016?", [hist], SearchType.TEMPORAL)
            assert answer.answer and "2016" in answer.answer
            assert llm.calls() == calls + 1


def test_a_month_finds_the_events_whose_time_overlaps_it(
    runtime: Runtime, tmp_path: Path, hist: str
) -> None:
    runtime.catalog.ensure_dataset(hist)
    report, path = AddReport(), tmp_path / "factory.txt"
    path.write_text(
        "Between 2018 and 2020 Acme Corp built a factory in Porto.\n\n"
        "Acme Corp signed the merger with Globex on 2019-03-11 in Paris.\n\n"
        "In April 2019 Bob Jones left Globex.\n\n"
        "In 2017 Carol Lee opened a shop in Lisbon.",
        encoding="utf-8",
    )
    runtime.catalog.add_file(hist, path, path.name, report, check_supported)
    run(runtime, hist)
    assert {e.properties["label"] for e in events(runtime, hist)} == {
        "2018 – 2020",
        "2019-03-11",
        "2019-04",
        "2017",
    }
    march = search(runtime.retrieval(), "what happened in March 2019", [hist], SearchType.TEMPORAL)
    # Overlap, not containment: the interval 2018 – 2020 is in March 2019 too, ranked below
    # the day that lies wholly inside it; April and 2017 are not.
    assert labels(march.results) == ["2019-03-11", "2018 – 2020"]
    assert march.results[0].evidence[0].startswith("2019-03-11")
