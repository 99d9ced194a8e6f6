"""The multi-step search types on an embedded runtime, with the test LLM server as the LLM.

A small corpus is cognified once through real Celery worker threads (LLM extraction and
embeddings from the test server); each test then searches it with or without the LLM. The
server's request counter shows how many LLM calls each loop made.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.models.vocabulary import CHUNK_COLLECTION
from core.settings import Settings
from retrieval.agentic import AgenticRetriever
from retrieval.base import RetrievalContext
from retrieval.context_extension import ContextExtensionRetriever
from retrieval.decomposition import DecompositionRetriever
from retrieval.lucky import FeelingLuckyRetriever
from retrieval.models import SearchType
from retrieval.registry import RETRIEVERS
from retrieval.search import search
from runtime import Runtime
from tests.backends import add_files, succeeded, threaded_runtime, write_files
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify

S = SearchType
DATASET = "lab"
CORPUS = {
    "engines.md": "Ada Lovelace worked with Charles Babbage. "
    "Charles Babbage designed the Analytical Engine.",
    "turing.md": "Analytical Engine inspired Alan Turing. Alan Turing worked at Bletchley Park.",
    "park.md": "Bletchley Park is located in Buckinghamshire. Buckinghamshire borders Oxfordshire.",
    "hopper.md": "Grace Hopper wrote the Compiler Manual. Grace Hopper served in Navy Reserve.",
    "style.md": "Always indent every Python file with tabs instead of spaces.",
}
RULES = (
    "# Coding rules\n\n"
    "- Never catch a bare Exception in Python code.\n"
    "- Use type hints on every public function.\n"
    "- Keep every module under three hundred lines.\n"
)


@pytest.fixture(scope="module")
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(embedding_dim=64) as llm:
        yield llm


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, server: LLMTestServer) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("multistep")
    settings = Settings(
        home=home / "home",
        llm_base_url=server.base_url,
        embedding_base_url=server.base_url,
        embedding_dim=64,
        llm_max_attempts=2,
        search_max_rounds=3,
        search_max_tool_calls=4,
    )
    with threaded_runtime(settings) as rt:
        report = add_files(rt, DATASET, write_files(home, CORPUS))
        assert not report.rejected, report.rejected
        rules = write_files(home, {"rules.md": RULES})
        report = add_files(rt, DATASET, rules, node_set="coding_rules")
        assert not report.rejected, report.rejected
        succeeded(rt, cognify(rt, DATASET))
        yield rt


def online(rt: Runtime, **settings: int) -> RetrievalContext:
    ctx = rt.retrieval()
    if settings:
        ctx.settings = rt.settings.model_copy(update=settings)
    return ctx


def offline(rt: Runtime, **settings: int) -> RetrievalContext:
    ctx = online(rt, **settings)
    ctx.llm = None
    return ctx


def lines(results: list) -> list[str]:
    return [r.text.split("\n", 1)[0] for r in results]


def test_cot_follows_up_until_the_round_limit(runtime: Runtime, server: LLMTestServer) -> None:
    before = server.calls()
    # Nothing names "Zanzibar Corp", so the validator never finds the answer sufficient.
    query = "Why did Ada Lovelace work with Zanzibar Corp?"
    response = search(online(runtime), query, [DATASET], S.GRAPH_COMPLETION_COT, top_k=2)
    # Three answers and a validation after each of the first two.
    assert server.calls() - before == 5
    assert response.answer and response.note is None
    assert len(response.results) > 2  # the follow-ups' triplets joined the context
    assert all(r.sources and r.sources[0].document_name for r in response.results)


def test_cot_stops_when_the_answer_is_sufficient(runtime: Runtime, server: LLMTestServer) -> None:
    before = server.calls()
    query = "Why did Ada Lovelace work with Charles Babbage?"
    response = search(online(runtime), query, [DATASET], S.GRAPH_COMPLETION_COT, top_k=2)
    assert server.calls() - before == 2  # one answer, one validation saying "sufficient"
    assert "Charles Babbage" in (response.answer or "")


def test_cot_without_llm_returns_context_and_says_so(runtime: Runtime) -> None:
    response = search(
        offline(runtime), "Why did Ada Lovelace work?", [DATASET], S.GRAPH_COMPLETION_COT, top_k=3
    )  # noqa: E501
    assert response.answer is None and "no LLM" in (response.note or "")
    assert response.results


def test_context_extension_offline_stops_when_nothing_is_new(runtime: Runtime) -> None:
    retriever = ContextExtensionRetriever(offline(runtime, search_max_rounds=8))
    everything = retriever.get_context("Ada Lovelace", [DATASET], 100)
    assert retriever.rounds == 2  # the second query found only known triplets
    narrow = ContextExtensionRetriever(offline(runtime, search_max_rounds=8))
    grown = narrow.get_context("Ada Lovelace", [DATASET], 1)
    assert 2 < narrow.rounds <= 8
    assert len(grown) == len(set(lines(grown))) > 1
    # Results are passages (each listing its triplets): the narrow rounds found no other ones.
    passages = {s.chunk_id for r in grown for s in r.sources}
    assert passages <= {s.chunk_id for r in everything for s in r.sources}


def test_context_extension_respects_the_round_bound(runtime: Runtime) -> None:
    retriever = ContextExtensionRetriever(offline(runtime, search_max_rounds=2))
    results = retriever.get_context("Ada Lovelace", [DATASET], 1)
    assert retriever.rounds == 2 and len(results) <= 2


def test_context_extension_with_llm_searches_with_its_answers(
    runtime: Runtime, server: LLMTestServer
) -> None:
    before = server.calls()
    query = "How is Ada Lovelace related to Bletchley Park?"
    response = search(
        online(runtime), query, [DATASET], S.GRAPH_COMPLETION_CONTEXT_EXTENSION, top_k=2
    )
    calls = server.calls() - before
    # One answer per extension round (at most 2 after the first retrieval) + the final one.
    assert 2 <= calls <= 3
    assert response.answer and len(response.results) >= 2


def test_decomposition_answers_each_sub_question(runtime: Runtime, server: LLMTestServer) -> None:
    before = server.calls()
    query = "Who worked with Charles Babbage and where did Alan Turing work?"
    response = search(online(runtime), query, [DATASET], S.GRAPH_COMPLETION_DECOMPOSITION, top_k=4)
    # Split, two sub-answers, one combined answer.
    assert server.calls() - before == 4
    names = {s.document_name for r in response.results for s in r.sources}
    assert {"engines.md", "turing.md"} <= names
    assert response.answer


def test_decomposition_offline_splits_by_rules(runtime: Runtime) -> None:
    retriever = DecompositionRetriever(offline(runtime))
    results = retriever.get_context(
        "Who designed the Analytical Engine and Grace Hopper?", [DATASET], 4
    )  # noqa: E501
    assert retriever.split_by == "rules"
    assert retriever.sub_questions == [
        "Who designed the Analytical Engine?",
        "Who designed Grace Hopper?",
    ]
    assert {"engines.md", "hopper.md"} <= {s.document_name for r in results for s in r.sources}


def test_graph_summary_puts_a_summary_first(runtime: Runtime, server: LLMTestServer) -> None:
    query = "Give an overview of Grace Hopper"
    plain = search(offline(runtime), query, [DATASET], S.GRAPH_SUMMARY_COMPLETION, top_k=3)
    first = plain.results[0]
    assert first.text.startswith("Summary: ") and "Grace Hopper" in first.text
    assert {s.chunk_id for r in plain.results[1:] for s in r.sources} <= {
        s.chunk_id for s in first.sources
    }
    before = server.calls()
    answered = search(online(runtime), query, [DATASET], S.GRAPH_SUMMARY_COMPLETION, top_k=3)
    assert server.calls() - before == 2  # the summary, then the answer
    assert answered.results[0].text.startswith("Summary: ") and answered.answer


def test_coding_rules_come_only_from_the_node_set(runtime: Runtime) -> None:
    response = search(
        offline(runtime),
        "How should Python files be indented?",
        [DATASET],
        S.CODING_RULES,
        top_k=10,
    )
    texts = [r.text for r in response.results]
    assert sorted(texts) == [
        "Keep every module under three hundred lines.",
        "Never catch a bare Exception in Python code.",
        "Use type hints on every public function.",
    ]
    assert {s.document_name for r in response.results for s in r.sources} == {"rules.md"}
    # The node set reached the chunk's vector payload too.
    vector = runtime.embedder.embed(["Use type hints on every public function."])[0].tolist()
    hits = runtime.vectors.search(CHUNK_COLLECTION, vector, datasets=[DATASET], limit=10)
    by_set = {hit.payload.get("node_set") for hit in hits}
    assert by_set == {"coding_rules", None}


def test_coding_rules_rank_and_explain_an_empty_set(runtime: Runtime) -> None:
    [best] = search(
        offline(runtime), "type hints for public functions", [DATASET], S.CODING_RULES, top_k=1
    ).results
    assert best.text == "Use type hints on every public function."
    empty = search(
        offline(runtime, coding_rules_node_set="team_rules"),
        "type hints",
        [DATASET],
        S.CODING_RULES,
        top_k=3,
    )
    assert empty.results == [] and "--node-set team_rules" in (empty.note or "")


def test_feeling_lucky_uses_the_llm_choice(runtime: Runtime, server: LLMTestServer) -> None:
    before = server.calls()
    response = search(online(runtime), "Grace Hopper manual", [DATASET], S.FEELING_LUCKY, top_k=2)
    assert "ran CHUNKS, chosen by the LLM" in (response.note or "")
    assert server.calls() - before == 2  # the choice, then the answer
    assert response.answer and response.results[0].sources


@pytest.mark.slow
def test_feeling_lucky_falls_back_to_the_router(runtime: Runtime, server: LLMTestServer) -> None:
    query = "How is Ada Lovelace related to Alan Turing?"
    response = search(offline(runtime), query, [DATASET], S.FEELING_LUCKY, top_k=2)
    assert "ran GRAPH_COMPLETION_CONTEXT_EXTENSION, chosen by the query router" in (
        response.note or ""
    )
    assert response.results
    # Each new request fails twice: the chat client (2 attempts) gives up, the embedder
    # (6 attempts) gets through on its third.
    server.configure(fail_first=2, fail_kind="500")
    try:
        retriever = FeelingLuckyRetriever(online(runtime), RETRIEVERS)
        results = retriever.get_context(query + " (again)", [DATASET], 2)
    finally:
        server.configure(fail_first=0)
    assert retriever.chosen is S.GRAPH_COMPLETION_CONTEXT_EXTENSION
    assert "the LLM failed" in (retriever.note or "") and results


def test_agentic_loop_stops_on_answer_or_at_its_bound(
    runtime: Runtime, server: LLMTestServer
) -> None:
    before = server.calls()
    query = "What did Alan Turing do?"
    response = search(online(runtime), query, [DATASET], S.AGENTIC_COMPLETION, top_k=2)
    # Three tool choices (GRAPH_COMPLETION, CHUNKS, answer) and the final answer.
    assert server.calls() - before == 4
    assert "2 tool call(s): GRAPH_COMPLETION" in (response.note or "")
    assert response.answer and response.results

    bounded = AgenticRetriever(online(runtime, search_max_tool_calls=1), RETRIEVERS)
    results = bounded.get_context(query + " Briefly.", [DATASET], 2)
    assert [c.tool for c in bounded.calls] == [S.GRAPH_COMPLETION] and results

    alone = AgenticRetriever(offline(runtime), RETRIEVERS)
    alone.get_context("What happened at Bletchley Park in 1939?", [DATASET], 2)
    assert [c.tool for c in alone.calls] == [S.TEMPORAL]  # the router's choice: time is asked


def test_search_without_a_type_routes(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "How is Ada Lovelace related to Alan Turing?"
    response = search(offline(runtime), query, [DATASET], None, top_k=None)
    assert response.search_type is S.GRAPH_COMPLETION_CONTEXT_EXTENSION
    assert response.route is not None and response.route.confidence > 0.5
    assert "routed to GRAPH_COMPLETION_CONTEXT_EXTENSION" in (response.note or "")
    assert response.results
    monkeypatch.delitem(RETRIEVERS, S.GRAPH_COMPLETION_CONTEXT_EXTENSION)
    fallback = search(offline(runtime), query, [DATASET], None)
    assert fallback.search_type is S.GRAPH_PPR  # the runner-up: the default
    assert "not available: ran GRAPH_PPR instead" in (fallback.note or "")


def test_api_routes_and_searches_without_a_type(runtime: Runtime) -> None:
    from fastapi.testclient import TestClient

    from api.http.app import create_app

    app = create_app(runtime)
    app.state.runtime = runtime  # no lifespan: the module's runtime and worker serve it
    client = TestClient(app)
    query = "What happened at Bletchley Park in 1939?"
    routed = client.post("/api/v1/route", json={"query": query})
    assert routed.status_code == 200
    assert routed.json()["search_type"] == "TEMPORAL"
    keys = {"search_type", "confidence", "runner_up", "runner_up_score", "reason", "as_of"}
    assert set(routed.json()) == keys
    blank = client.post("/api/v1/route", json={"query": "  "})
    assert blank.status_code == 422 and "query is empty" in blank.json()["error"]["message"]
    body = {"query": "How is Ada Lovelace related to Alan Turing?", "datasets": [DATASET]}
    found = client.post("/api/v1/search", json=body).json()
    assert found["search_type"] == "GRAPH_COMPLETION_CONTEXT_EXTENSION"
    assert found["route"]["search_type"] == "GRAPH_COMPLETION_CONTEXT_EXTENSION"
    assert found["results"] and all(r["sources"] for r in found["results"])
