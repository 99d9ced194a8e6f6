"""GRAPH_PPR on a real embedded runtime: the second hop of a question that dense search misses.

The corpus is built so the premise holds and is checked: the passage answering the second hop
shares no words with the question beyond a person's name the question never states, while
distractors read almost like the question. Only the bridge through that person (named by the
first-hop passage) leads to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.settings import Settings
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests.backends import ingest, threaded_runtime, write_files

QUESTION = "Where did the composer of the Zorvath Quintet grow up?"
FIRST_HOP = (
    "The Zorvath Quintet is a chamber work for two violins, viola, cello and piano. "
    "It was written by Elira Montbrook in 1891 and first played in Prague."
)
SECOND_HOP = (
    "Elira Montbrook spent her childhood in Kestrelholm, a fishing village on the northern "
    "coast of Norway, where her father kept the lighthouse."
)
DISTRACTORS = [
    "The Marlow Quintet is a chamber work composed by Tobias Renn, who grew up in Ashby.",
    "The composer of the Halden Quintet, Ivo Sarkany, grew up in the town of Pecsvar.",
    "Where did the composer Osric Valen grow up? Valen wrote the Brevik Quintet in Oslo.",
    "The Tamsin Quintet was composed by Greta Lund, who grew up near Uppsala.",
    "Composer Piet Haverkamp grew up in Delft and wrote the Ostrava Quintet for strings.",
    "The Calder Quintet for piano and strings was written by a composer who grew up in Leeds.",
    "Nadia Korsh, composer of the Vitebsk Quintet, grew up in a small town on the Dvina.",
    "The composer of the Lindqvist Quintet grew up in Gothenburg, where he studied the organ.",
]


@pytest.fixture(scope="module")
def runtime(
    tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]
) -> Iterator[Runtime]:
    """The corpus above, cognified once through real Celery worker threads."""
    home = tmp_path_factory.mktemp("ppr")
    texts = {"first.txt": FIRST_HOP, "second.txt": SECOND_HOP}
    texts |= {f"distractor{i}.txt": text for i, text in enumerate(DISTRACTORS)}
    with threaded_runtime(Settings(home=home / "home", llm_base_url=None), models) as rt:
        ingest(rt, "multihop", write_files(home / "docs", texts), timeout=300)
        yield rt


def ranked_documents(rt: Runtime, kind: SearchType, top_k: int = 10) -> list[str]:
    response = search(rt.retrieval(), QUESTION, ["multihop"], kind, top_k)
    names = [s.document_name for r in response.results for s in r.sources]
    return list(dict.fromkeys(names))


def test_dense_search_alone_does_not_reach_the_second_hop(runtime: Runtime) -> None:
    dense = ranked_documents(runtime, SearchType.CHUNKS)
    assert dense[0] == "first.txt"
    assert "second.txt" not in dense[:3], dense


def test_ppr_ranks_the_second_hop_in_the_top_three(runtime: Runtime) -> None:
    ranked = ranked_documents(runtime, SearchType.GRAPH_PPR)
    assert "first.txt" in ranked[:3], ranked
    assert "second.txt" in ranked[:3], ranked


def test_ppr_results_carry_their_chunk_and_document(runtime: Runtime) -> None:
    response = search(runtime.retrieval(), QUESTION, ["multihop"], SearchType.GRAPH_PPR, 4)
    assert 0 < len(response.results) <= 4
    scores = [r.score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    for result in response.results:
        [source] = result.sources
        assert source.chunk_id and source.document_id and result.text
    second = next(r for r in response.results if r.sources[0].document_name == "second.txt")
    assert "Kestrelholm" in second.text


def test_ppr_on_an_unknown_dataset_finds_nothing(runtime: Runtime) -> None:
    response = search(runtime.retrieval(), QUESTION, ["nothing-here"], SearchType.GRAPH_PPR, 5)
    assert response.results == []


# The path that led to a result (retrieval/ppr/paths.py): the second hop's passage is reached
# through the composer the question never names.
def test_the_second_hop_names_the_bridge_and_where_it_came_from(runtime: Runtime) -> None:
    response = search(runtime.retrieval(), QUESTION, ["multihop"], SearchType.GRAPH_PPR, 5)
    by_document = {r.sources[0].document_name: r for r in response.results}
    second = by_document["second.txt"]
    assert second.evidence, second
    assert "Elira Montbrook" in second.evidence[0], second.evidence
    # One hop back: the bridge got its mass through the first hop's passage, which names the
    # work the question asks about.
    assert any("Zorvath Quintet" in line and "—" in line for line in second.evidence), second
    assert all(len(r.evidence) <= 3 for r in response.results)
    assert second.text.startswith("Elira Montbrook")  # the passage's text is left as it was
