"""k results means k passages: GRAPH_COMPLETION-style results group the triplets
under the chunk they were read from, and what `recall` and `cogmill demo` use by default.

The bundled sample corpus, cognified with the offline extractor on the embedded stores through
real Celery worker threads; the CLI runs `cogmill demo` in its own home.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.services.demo import QUESTIONS, SAMPLE_CORPUS
from core.settings import Settings
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.memory import recall
from retrieval.models import SearchResult, SearchType
from retrieval.search import search
from retrieval.sessions import SessionStore
from runtime import Runtime
from tests.backends import ingest, threaded_runtime

S = SearchType
DATASET = "sample"
CURIE = "Marie Curie"
GROUPED = [
    S.GRAPH_COMPLETION,
    S.GRAPH_COMPLETION_COT,
    S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
    S.GRAPH_COMPLETION_DECOMPOSITION,
]


@pytest.fixture(scope="module")
def runtime(
    tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]
) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("passages")
    with threaded_runtime(Settings(home=home / "home", llm_base_url=None), models) as rt:
        ingest(rt, DATASET, sorted(SAMPLE_CORPUS.iterdir()), timeout=600)
        yield rt


def passage(result: SearchResult) -> tuple[str, ...]:
    return tuple(s.chunk_id for s in result.sources)


def test_triplets_alone_repeat_a_passage(runtime: Runtime) -> None:
    """Why grouping is needed: one result per triplet shows the Curie paragraph twice."""
    ctx = runtime.retrieval()
    triplets = GraphCompletionRetriever(ctx.graph, ctx.vectors, ctx.embedder).triplets(
        QUESTIONS[0], [DATASET], 5
    )
    shown = [passage(r) for r in triplets]
    assert len(shown) > len(set(shown)), [r.text.split("\n")[0] for r in triplets]


@pytest.mark.parametrize("search_type", GROUPED)
@pytest.mark.parametrize("top_k", [3, 5])
def test_top_k_is_k_distinct_passages_each_with_its_triplets(
    runtime: Runtime, search_type: SearchType, top_k: int
) -> None:
    ctx = runtime.retrieval()
    for question in QUESTIONS:
        results = search(ctx, question, [DATASET], search_type, top_k).results
        shown = [passage(r) for r in results]
        assert len(shown) == len(set(shown)), (question, [r.text[:60] for r in results])
        if search_type is S.GRAPH_COMPLETION:
            assert len(results) == top_k, (question, len(results))
        for result in results:
            assert result.evidence and all("→" in line for line in result.evidence), result
            assert result.text.startswith("\n".join(result.evidence)), result.text
            assert len(result.text.split("\n")) > len(result.evidence)  # the passage follows


def test_the_best_passage_lists_the_best_triplet_and_the_curie_facts_together(
    runtime: Runtime,
) -> None:
    ctx = runtime.retrieval()
    retriever = GraphCompletionRetriever(ctx.graph, ctx.vectors, ctx.embedder)
    best = retriever.triplets(QUESTIONS[0], [DATASET], 1)[0].text.split("\n")[0]
    results = retriever.get_context(QUESTIONS[0], [DATASET], 3)
    assert results[0].evidence[0] == best
    curie = [r for r in results if CURIE in r.text.split("\n")[len(r.evidence)]]
    assert len(curie) == 1 and len(curie[0].evidence) >= 2, [r.evidence for r in results]
    # Every triplet of the session trace points at the result that lists it.
    assert {index for index, _ in retriever.trace} == set(range(len(results)))


def test_recall_uses_the_routers_default_type_unless_one_is_given(runtime: Runtime) -> None:
    ctx = runtime.retrieval()
    store = SessionStore(ctx.state, ctx.settings.session_ttl_seconds)
    plain = recall(ctx, QUESTIONS[0], session="default", datasets=[DATASET])
    named = recall(
        ctx, QUESTIONS[0], session="named", datasets=[DATASET], search_type=S.GRAPH_COMPLETION
    )
    assert plain.qa_id and named.qa_id
    record, chosen = store.qa("default", plain.qa_id), store.qa("named", named.qa_id)
    assert record is not None and record.search_type == S.GRAPH_PPR.value
    assert chosen is not None and chosen.search_type == S.GRAPH_COMPLETION.value


@pytest.mark.slow
def test_demo_answers_with_the_routed_search_and_prints_each_passage_once(
    tmp_path: Path,
) -> None:
    env = {"COGMILL_HOME": str(tmp_path / "home"), "COGMILL_LLM_BASE_URL": ""}
    result = CliRunner().invoke(app, ["demo"], env=env)
    assert result.exit_code == 0, result.output
    first = result.output.split(QUESTIONS[0], 1)[1].split(QUESTIONS[1], 1)[0]
    assert "→" not in first, first  # passages, not GRAPH_COMPLETION's triplet lines
    assert "marie_curie.txt" in first, first
    paragraphs = [line for line in first.splitlines() if "Marie Curie was born" in line]
    assert len(paragraphs) == 1, first
