"""CYPHER and NATURAL_LANGUAGE against the real Neo4j test server: read-only, with provenance;
the CypherRunner contract on Neo4j."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.graph import Edge, Node, Support, chunk_id, entity_id
from core.ports import CypherError
from core.settings import Settings
from core.stores import factory
from core.stores.neo4j.cypher import Neo4jCypherRunner
from core.stores.neo4j.graph import Neo4jGraphStore
from retrieval.cypher import ReadOnlyViolation, check_read_only
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests import services
from tests.backends import installed_runtime, llm_settings
from tests.contracts.cypher_runner import CypherRunnerContract
from tests.llm_answers import SAFE_CYPHER
from tests.llm_server import LLMTestServer

pytestmark = [pytest.mark.integration, pytest.mark.services]


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("cypher")
    with installed_runtime(
        Settings(home=home, neo4j_uri=services.neo4j_uri(), **llm_settings(llm))
    ) as rt:
        yield rt


@pytest.fixture(scope="module")
def dataset(runtime: Runtime) -> Iterator[str]:
    """A dataset of one document, one chunk and one entity mentioned by it."""
    name = f"cy-{uuid.uuid4().hex[:8]}"
    doc, chunk = f"doc-{name}", chunk_id(f"doc-{name}", 0)
    support = [Support(document_id=doc, chunk_id=chunk)]
    marie = entity_id(name, "Marie Curie")
    runtime.graph.upsert_nodes(
        [
            Node(id=doc, type="Document", dataset=name, name="curie.txt"),
            Node(
                id=chunk,
                type="DocumentChunk",
                dataset=name,
                support=support,
                properties={
                    "text": "Marie Curie was born in Warsaw.",
                    "document_id": doc,
                    "document_name": "curie.txt",
                },
            ),
            Node(id=marie, type="Entity", dataset=name, name="Marie Curie", support=support),
        ]
    )
    runtime.graph.upsert_edges(
        [Edge(source=chunk, target=marie, name="MENTIONS", dataset=name, support=support)]
    )
    yield name
    runtime.graph.delete_dataset(name)


def test_cypher_rows_come_back_as_json_with_the_chunks_behind_them(
    runtime: Runtime, dataset: str
) -> None:
    query = (
        "MATCH (c:DocumentChunk)-[:REL {name: 'MENTIONS'}]->(e:Entity) "
        "WHERE c.dataset IN $datasets RETURN e.name AS entity, e AS node"
    )
    response = search(runtime.retrieval(), query, [dataset], SearchType.CYPHER)
    assert len(response.results) == 1
    row = json.loads(response.results[0].text)
    assert row["entity"] == "Marie Curie" and "Entity" in row["node"]["labels"]
    assert [s.document_name for s in response.results[0].sources] == ["curie.txt"]


def test_cypher_returns_at_most_top_k_rows(runtime: Runtime, dataset: str) -> None:
    query = "UNWIND range(1, 100) AS i RETURN i"
    response = search(runtime.retrieval(), query, [dataset], SearchType.CYPHER, top_k=7)
    assert [json.loads(r.text)["i"] for r in response.results] == list(range(1, 8))


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("MATCH (n:Node) DETACH DELETE n", "DELETE"),
        ("CREATE (n:Hack) RETURN n", "CREATE"),
        ("MATCH (n) SET n.x = 1 RETURN n", "SET"),
        ("MERGE (n:Hack {id: 1}) RETURN n", "MERGE"),
        ("LOAD CSV FROM 'file:///x' AS row RETURN row", "LOAD CSV"),
        ("CALL { MATCH (n) RETURN n } IN TRANSACTIONS RETURN 1", "IN TRANSACTIONS"),
        ("CALL dbms.setConfigValue('a', 'b')", "dbms.setConfigValue"),
        ("call apoc.create.node(['X'], {}) YIELD node RETURN node", "apoc.create.node"),
        ("DROP INDEX cogmill_node_name", "DROP"),
    ],
)
def test_writes_are_refused_before_they_reach_the_server(
    runtime: Runtime, dataset: str, query: str, named: str
) -> None:
    with pytest.raises(ReadOnlyViolation, match=named):
        search(runtime.retrieval(), query, [dataset], SearchType.CYPHER)


def test_words_inside_strings_and_property_names_are_not_clauses() -> None:
    query = "MATCH (n) WHERE n.name = 'CREATE or DELETE' AND n.set IS NULL RETURN n.`delete`"
    assert check_read_only(query) == query


class TestNeo4jCypherRunner(CypherRunnerContract):
    @pytest.fixture
    def cypher_runner(self) -> Iterator[Neo4jCypherRunner]:
        runner = Neo4jCypherRunner(services.neo4j_uri())
        yield runner
        runner.close()

    @pytest.fixture
    def dataset(self) -> str:
        return f"cyc-{uuid.uuid4().hex[:10]}"

    @pytest.fixture
    def graph(self, dataset: str) -> Iterator[Neo4jGraphStore]:
        store = Neo4jGraphStore(services.neo4j_uri())
        yield store
        store.delete_dataset(dataset)
        store.close()


def test_the_server_refuses_a_write_the_check_would_miss(runtime: Runtime, dataset: str) -> None:
    runner = runtime.cypher
    with pytest.raises(CypherError, match="(?i)write|access"):
        runner.run_read("CREATE (n:ShouldNotExist) RETURN n", {}, 1)
    rows = runner.run_read("MATCH (n:ShouldNotExist) RETURN count(n) AS n", {}, 1)
    assert rows == [{"n": 0}]


def test_searches_share_the_runtimes_one_runner(runtime: Runtime, dataset: str) -> None:
    ctx, runner = runtime.retrieval(), runtime.cypher
    assert ctx.cypher is not None and ctx.cypher() is runner
    query = "MATCH (c:DocumentChunk) WHERE c.dataset IN $datasets RETURN count(c) AS n"
    for _ in range(3):
        response = search(runtime.retrieval(), query, [dataset], SearchType.CYPHER)
        assert json.loads(response.results[0].text) == {"n": 1}
    assert runtime.cypher is runner  # no runner (and no driver) opened per query


def test_the_factory_says_the_embedded_graph_has_no_cypher(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs the Neo4j graph store") as caught:
        factory.cypher_runner(Settings(home=tmp_path))
    assert "COGMILL_NEO4J_URI" in str(caught.value)


# Queries Neo4j refuses, and what of its own text each answer carried before being put in
# cogmill's words: a Java exception, the parser's expectations, an internal failure (a 503).
REFUSED = {
    "CALL db.index.vector.queryNodes('nope', 5, [1.0])": "java.lang.IllegalArgumentException",
    "MATCH (n RETURN n": "Invalid input",
    "RETURN substring('abc', -1)": "Cannot handle negative start index",
    "RETURN 1/0": "/ by zero",
}
LIBRARY_WORDS = ("java", "Caused by", "Exception", "Invalid input", "Neo.", "Neo4j refused")


@pytest.mark.parametrize("query", REFUSED)
def test_a_refused_query_is_told_in_cogmills_words(
    runtime: Runtime, dataset: str, query: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cogmill.cypher")
    with pytest.raises(CypherError) as caught:
        search(runtime.retrieval(), query, [dataset], SearchType.CYPHER)
    said = str(caught.value)
    assert not [word for word in LIBRARY_WORDS if word in said], said
    assert "check" in said  # what to do
    # Neo4j's own words stay server-side: in the log and in `detail` (for NATURAL_LANGUAGE).
    assert REFUSED[query] in (caught.value.detail or "")
    assert REFUSED[query] in caplog.text


def test_a_syntax_error_says_where(runtime: Runtime, dataset: str) -> None:
    with pytest.raises(CypherError, match=r"not valid Cypher.*near line 1, column 10"):
        search(runtime.retrieval(), "MATCH (n RETURN n", [dataset], SearchType.CYPHER)


def test_natural_language_runs_the_llms_read_only_query(
    runtime: Runtime, dataset: str, llm: LLMTestServer
) -> None:
    response = search(
        runtime.retrieval(), "Which chunks are there?", [dataset], SearchType.NATURAL_LANGUAGE
    )
    assert response.results and SAFE_CYPHER.startswith("MATCH (c:DocumentChunk)")
    assert all(s.chunk_id for r in response.results for s in r.sources)
    assert response.answer  # answered from the rows through the real client


def test_natural_language_retries_with_the_error(
    runtime: Runtime, dataset: str, llm: LLMTestServer
) -> None:
    calls, ctx = llm.calls(), runtime.retrieval()
    response = search(ctx, "Show me broken chunks", [dataset], SearchType.NATURAL_LANGUAGE)
    assert response.results  # the first query failed; the retry with its error worked
    assert llm.calls() - calls == 3  # broken query, fixed query, answer


def test_natural_language_never_runs_a_write(runtime: Runtime, dataset: str) -> None:
    with pytest.raises(ValueError, match="DELETE"):
        search(runtime.retrieval(), "sneaky question", [dataset], SearchType.NATURAL_LANGUAGE)
    rows = search(
        runtime.retrieval(),
        "MATCH (c:DocumentChunk) WHERE c.dataset IN $datasets RETURN count(c) AS n",
        [dataset],
        SearchType.CYPHER,
    )
    assert json.loads(rows.results[0].text) == {"n": 1}
