"""The first batch of search types over a real embedded runtime (SQLite graph, Qdrant Edge,
SQLite lexical index, Celery worker threads); the LLM and embeddings are the test server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from core.lexical import bm25_search
from core.models.lexical import LexicalDoc
from core.settings import Settings
from core.stores.sqlite.lexical import SQLiteLexicalIndex
from retrieval.models import SearchType
from retrieval.search import NO_LLM_NOTE, search
from runtime import Runtime
from tests.backends import ingest, llm_settings, threaded_runtime, write_files
from tests.llm_server import LLMTestServer

CORPUS = {
    "curie.txt": "Marie Curie was born in Warsaw. Marie Curie discovered Polonium with Pierre "
    "Curie. Her maiden name was Sklodowska and she won two Nobel prizes.",
    "turing.txt": "Alan Turing was born in London. Alan Turing designed the Bombe at Bletchley "
    "Park. He proposed the imitation game in 1950.",
    "danube.txt": "The Danube flows through Vienna. The Danube ends in the Black Sea after "
    "passing Budapest and Belgrade.",
    "beijing.txt": "北京是中国的首都。长城在北京附近，很长。",
    "tokyo.txt": "東京は日本の首都です。富士山は日本で一番高い山です。",
}
COMPLETIONS = [
    SearchType.RAG_COMPLETION,
    SearchType.GRAPH_COMPLETION,
    SearchType.TRIPLET_COMPLETION,
    SearchType.HYBRID_COMPLETION,
]


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("retrievers")
    with threaded_runtime(Settings(home=home / "home", **llm_settings(llm))) as rt:
        ingest(rt, "corpus", write_files(home / "files", CORPUS))
        yield rt


def names(response_results: list) -> list[str]:
    return [s.document_name for r in response_results for s in r.sources]


def test_lexical_search_finds_a_rare_word_with_its_provenance(runtime: Runtime) -> None:
    response = search(runtime.retrieval(), "Sklodowska", ["corpus"], SearchType.CHUNKS_LEXICAL)
    assert response.results, "BM25 found nothing for a word that is in the corpus"
    top = response.results[0]
    assert "Sklodowska" in top.text and top.sources[0].document_name == "curie.txt"
    assert top.sources[0].chunk_id and top.sources[0].document_id
    assert all("Sklodowska" in r.text for r in response.results)


def test_lexical_search_works_for_chinese_and_japanese(runtime: Runtime) -> None:
    ctx = runtime.retrieval()
    fuji = search(ctx, "富士山はどこ", ["corpus"], SearchType.CHUNKS_LEXICAL, top_k=1)
    assert names(fuji.results) == ["tokyo.txt"]
    wall = search(ctx, "长城", ["corpus"], SearchType.CHUNKS_LEXICAL, top_k=1)
    assert names(wall.results) == ["beijing.txt"]
    capital = search(ctx, "首都", ["corpus"], SearchType.CHUNKS_LEXICAL)
    assert sorted(names(capital.results)) == ["beijing.txt", "tokyo.txt"]


def test_lexical_index_is_written_at_ingestion_and_persists(runtime: Runtime) -> None:
    chunks = runtime.graph.count("corpus")["DocumentChunk"]
    index = SQLiteLexicalIndex(runtime.settings.home / "lexical.sqlite")  # a second connection
    try:
        assert index.count("corpus") == chunks
    finally:
        index.close()


def test_deleted_documents_never_surface_in_lexical_search(
    runtime: Runtime, tmp_path: Path
) -> None:
    files = {"keep.txt": "Zanzibar cloves are famous.", "drop.txt": "Zanzibar was a sultanate."}
    ingest(runtime, "gone", write_files(tmp_path, files))
    ctx = runtime.retrieval()
    before = search(ctx, "Zanzibar sultanate", ["gone"], SearchType.CHUNKS_LEXICAL)
    assert names(before.results)[0] == "drop.txt"
    runtime.catalog.remove_named("gone", "drop.txt")
    after = search(ctx, "Zanzibar sultanate", ["gone"], SearchType.CHUNKS_LEXICAL)
    assert names(after.results) == ["keep.txt"]
    assert runtime.lexical.count("gone") == 1
    # A posting whose chunk is gone from the graph (an interrupted delete) is skipped and dropped.
    runtime.lexical.add("gone", [LexicalDoc("no-such-chunk", "d", "Zanzibar sultanate ghost")])
    ghost = search(ctx, "Zanzibar sultanate ghost", ["gone"], SearchType.CHUNKS_LEXICAL)
    assert names(ghost.results) == ["keep.txt"]
    assert runtime.lexical.count("gone") == 1
    runtime.catalog.remove_dataset("gone")
    assert runtime.lexical.count("gone") == 0


def test_lexical_index_is_rebuilt_for_chunks_written_before_it(runtime: Runtime) -> None:
    chunks = runtime.graph.count("corpus")["DocumentChunk"]
    runtime.lexical.remove_dataset("corpus")
    response = search(runtime.retrieval(), "Bletchley", ["corpus"], SearchType.CHUNKS_LEXICAL)
    assert names(response.results) == ["turing.txt"]
    assert runtime.lexical.count("corpus") == chunks


def test_summaries_come_with_the_chunk_they_summarise(runtime: Runtime) -> None:
    response = search(runtime.retrieval(), "Danube Vienna", ["corpus"], SearchType.SUMMARIES)
    assert response.results and response.answer is None
    top = response.results[0]
    assert top.text.startswith("The Danube flows through Vienna")
    assert top.sources and all(s.document_name == "danube.txt" for s in top.sources)
    chunk_level = [r for r in response.results if any(s.chunk_id for s in r.sources)]
    assert chunk_level and chunk_level[0].sources[0].document_name == "danube.txt"


@pytest.mark.parametrize("search_type", COMPLETIONS)
def test_completion_types_answer_from_their_context(
    runtime: Runtime, llm: LLMTestServer, search_type: SearchType
) -> None:
    calls = llm.calls()
    response = search(runtime.retrieval(), "Where was Alan Turing born?", ["corpus"], search_type)
    assert response.note is None and response.results
    assert response.answer and "London" in response.answer, response
    assert any(s.document_name == "turing.txt" for r in response.results for s in r.sources)
    assert llm.calls() > calls  # answered through the real client and server


@pytest.mark.parametrize("search_type", COMPLETIONS)
def test_without_an_llm_completion_types_return_context_and_say_so(
    runtime: Runtime, search_type: SearchType
) -> None:
    ctx = runtime.retrieval()
    ctx.llm = None
    response = search(ctx, "Where was Alan Turing born?", ["corpus"], search_type)
    assert response.answer is None and response.note == NO_LLM_NOTE
    assert any("London" in r.text for r in response.results)


def test_hybrid_returns_chunks_and_lets_the_lexical_lane_lead(runtime: Runtime) -> None:
    response = search(runtime.retrieval(), "Sklodowska", ["corpus"], SearchType.HYBRID_COMPLETION)
    assert response.results[0].sources[0].document_name == "curie.txt"
    assert "Sklodowska" in response.results[0].text
    assert all(len(r.sources) == 1 for r in response.results)  # one chunk per result


class Birthplace(BaseModel):
    person: str
    city: str


def test_response_model_makes_the_answer_structured(runtime: Runtime) -> None:
    ctx = runtime.retrieval()
    query = "Where was Marie Curie born?"
    response = search(ctx, query, ["corpus"], SearchType.RAG_COMPLETION, response_model=Birthplace)
    assert response.answer_json is not None
    parsed = Birthplace.model_validate(response.answer_json)
    assert "Warsaw" in parsed.city
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "year": {"type": ["integer", "null"]}},
        "required": ["city"],
    }
    as_schema = search(ctx, query, ["corpus"], SearchType.GRAPH_COMPLETION, response_model=schema)
    assert set(as_schema.answer_json or {}) == {"city", "year"}
    assert "Warsaw" in as_schema.answer_json["city"] and as_schema.answer.startswith("{")


def test_unusable_response_models_are_refused_clearly(runtime: Runtime) -> None:
    ctx = runtime.retrieval()
    with pytest.raises(ValueError, match="must describe an object"):
        search(ctx, "q", ["corpus"], SearchType.RAG_COMPLETION, response_model={"type": "string"})
    with pytest.raises(ValueError, match="returns context only"):
        search(ctx, "q", ["corpus"], SearchType.CHUNKS, response_model=Birthplace)


@pytest.mark.parametrize("search_type", [SearchType.CYPHER, SearchType.NATURAL_LANGUAGE])
def test_cypher_types_say_they_need_neo4j_on_the_embedded_graph(
    runtime: Runtime, search_type: SearchType
) -> None:
    with pytest.raises(ValueError, match="needs the Neo4j graph store"):
        search(runtime.retrieval(), "MATCH (n) RETURN n LIMIT 1", ["corpus"], search_type)


@pytest.mark.services
def test_the_redis_lexical_index_ranks_like_the_sqlite_one(tmp_path: Path) -> None:
    from core.stores.redis.lexical import RedisLexicalIndex
    from tests import services

    docs = [LexicalDoc(f"c{i}", "d", text) for i, text in enumerate(CORPUS.values())]
    prefix = f"test-lex-{time.time_ns()}:"
    redis_index = RedisLexicalIndex(services.redis_url(), prefix=prefix)
    sqlite_index = SQLiteLexicalIndex(tmp_path / "lexical.sqlite")
    try:
        for index in (redis_index, sqlite_index):
            index.add("ds", docs)
            index.add("ds", docs[:2])  # a redelivered batch changes nothing
        for query in ("Curie Warsaw", "首都", "Danube Black Sea"):
            expected = bm25_search(sqlite_index, ["ds"], query, 5)
            got = bm25_search(redis_index, ["ds"], query, 5)
            assert [c for c, _ in got] == [c for c, _ in expected] and expected
            assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in expected]
        redis_index.remove("ds", ["c0", "entity-id"])
        assert redis_index.count("ds") == len(docs) - 1
        assert "c0" not in {c for c, _ in bm25_search(redis_index, ["ds"], "Curie", 5)}
        redis_index.remove_dataset("ds")
        assert redis_index.count("ds") == 0 and bm25_search(redis_index, ["ds"], "首都", 5) == []
    finally:
        redis_index.remove_dataset("ds")
        redis_index.close()
        sqlite_index.close()


def test_the_api_takes_a_json_schema_as_response_model(runtime: Runtime) -> None:
    from fastapi.testclient import TestClient

    from api.http.app import create_app

    app = create_app(runtime)
    app.state.runtime = runtime  # no lifespan: this module's worker and runtime are used
    client = TestClient(app)
    body = {
        "query": "Where was Marie Curie born?",
        "datasets": ["corpus"],
        "search_type": "rag_completion",
        "response_model": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    reply = client.post("/api/v1/search", json=body)
    assert reply.status_code == 200, reply.text
    assert "Warsaw" in reply.json()["answer_json"]["city"]
    bad = client.post("/api/v1/search", json={**body, "response_model": {"type": "array"}})
    assert bad.status_code == 422 and "must describe an object" in bad.text
