"""A tenant's CYPHER and NATURAL_LANGUAGE cannot read another tenant, against the real Neo4j.

Two tenants' datasets share the database: `alpha:docs` holds a secret, `beta:docs` plain text,
and a relationship of each dataset crosses to the other's nodes (so paths could reach them).
Every query of BYPASSES is sent as beta's admin would send it (confined); each must either be
refused with a message naming why, or run and return nothing of alpha's. The same reads run
raw (an operator's) do find alpha's secret, so each check can fail. `-s` prints the record:
each bypass and what it returned.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from core.models.graph import Edge, Node, Support
from core.ports import CypherError
from core.settings import Settings
from retrieval.base import RetrievalContext
from retrieval.cypher_confine import CypherScopeError
from retrieval.cypher_guard import ReadOnlyViolation
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests import services
from tests.backends import installed_runtime, llm_settings
from tests.llm_server import LLMTestServer

pytestmark = [pytest.mark.integration, pytest.mark.services]

SECRET = "Zephyrquartz"
RUN = uuid.uuid4().hex[:6]
ALPHA, BETA = f"alpha{RUN}:docs", f"beta{RUN}:docs"
LS, NBSP, CYRILLIC_I = "\u2028", "\u00a0", "\u0406"
BYPASSES: dict[str, str] = {
    "label-less node": "MATCH (n) RETURN n.dataset, n.text",
    "names the other dataset": f"MATCH (c:DocumentChunk {{dataset: '{ALPHA}'}}) RETURN c.text",
    "WHERE ... OR true": f"MATCH (c) WHERE c.dataset = '{ALPHA}' OR true RETURN c.text",
    "text search ignoring $datasets": f"MATCH (c) WHERE c.text CONTAINS '{SECRET}' RETURN c",
    "OPTIONAL MATCH": "OPTIONAL MATCH (c:DocumentChunk) RETURN c.text",
    "OPTIONAL MATCH of other nodes": (
        "MATCH (b:DocumentChunk) OPTIONAL MATCH (a) WHERE a.dataset <> b.dataset RETURN a.text"
    ),
    "traversal to the other tenant": "MATCH (b)-[r]-(a) RETURN a.text, a.dataset, r.name",
    "anonymous relationship": "MATCH ()-[r]->() RETURN r.dataset, r.name",
    "variable-length path": "MATCH (b)-[*1..5]-(a) RETURN a.text",
    "named path, nodes(p)": "MATCH p = (b)--(a) RETURN nodes(p)",
    "relationships(p)": "MATCH p = ()-[*]-() RETURN relationships(p)",
    "shortestPath": "MATCH p = shortestPath((b)-[*]-(a)) RETURN a.text",
    "quantified path pattern": "MATCH (b) ((x)--(y)){1,3} (a) RETURN a.text",
    "CALL subquery": "CALL { MATCH (a) RETURN a } RETURN a.text",
    "CALL (x) subquery": "MATCH (b) CALL (b) { MATCH (a) RETURN a } RETURN a.text",
    "UNION": "MATCH (b:DocumentChunk) RETURN b.text AS t UNION MATCH (a) RETURN a.text AS t",
    "vector index procedure": (
        "CALL db.index.vector.queryNodes('cogmill_vectors', 5, [0.1, 0.2]) YIELD node "
        "RETURN node.text"
    ),
    "db.labels()": "CALL db.labels() YIELD label RETURN label",
    "apoc function": "RETURN apoc.cypher.runFirstColumnSingle('MATCH (a) RETURN a.text', {})",
    "apoc procedure": "CALL apoc.cypher.run('MATCH (a) RETURN a', {}) YIELD value RETURN value",
    "id() lookup": "MATCH (n) WHERE id(n) >= 0 RETURN n.text",
    "elementId() lookup": "MATCH (n) WHERE elementId(n) <> '' RETURN n.text",
    "startNode/endNode": "MATCH ()-[r]->() RETURN endNode(r).text, startNode(r).text",
    "pattern comprehension": "MATCH (b) RETURN [(b)--(a) | a.text]",
    "EXISTS subquery": (
        f"MATCH (b) WHERE EXISTS {{ MATCH (a) WHERE a.text CONTAINS '{SECRET}' }} RETURN b.text"
    ),
    "COUNT subquery": "MATCH (b) RETURN COUNT { MATCH (a) } AS n",
    "list comprehension": "MATCH (b) RETURN [x IN [1, 2] | x]",
    "map projection .*": "MATCH (b) RETURN b {.*}",
    "map projection with a pattern": "MATCH (b) RETURN b {others: [(b)--(a) | a.text]}",
    "inline node WHERE": f"MATCH (a WHERE a.dataset = '{ALPHA}') RETURN a.text",
    "label negation": "MATCH (a:!Nothing) RETURN a.text",
    "comment ended by CR": "MATCH (b) RETURN b.text // x\rUNION MATCH (a) RETURN a.text",
    "block comment": "MATCH (b) /* UNION MATCH (a) RETURN a.text */ RETURN b.text",
    "line separator": f"MATCH (b) RETURN b.text{LS}UNION MATCH (a) RETURN a.text",
    "no-break space": f"MATCH{NBSP}(a) RETURN a.text",
    "homoglyph UNION": f"MATCH (b) RETURN b.text U N{CYRILLIC_I}ON MATCH (a) RETURN a.text",
    "escaped identifiers": "MATCH (`b`) RETURN `b`.`text`, `b`.`dataset`",
    "backslash in a backticked name": "MATCH (`b\\u0060) RETURN 1",
    "unicode escape in a string": (
        f"MATCH (c) WHERE c.text = '\\u0027 OR c.text CONTAINS \\u0027{SECRET}' RETURN c.text"
    ),
    "another parameter": "MATCH (a) WHERE a.dataset IN $all RETURN a.text",
    "$datasets unwound": "UNWIND $datasets AS d MATCH (a {dataset: d}) RETURN a.text",
    "other dataset unwound": f"UNWIND ['{ALPHA}'] AS d MATCH (a) WHERE a.dataset = d RETURN a.text",
    "WITH *": "MATCH (n) WITH * RETURN n.text",
    "WITH collect, UNWIND": "MATCH (b) WITH collect(b) AS bs UNWIND bs AS x RETURN x.text",
    "LOAD CSV": "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
    "SHOW TRANSACTIONS": "SHOW TRANSACTIONS",
    "USE system": "USE system MATCH (n) RETURN n",
    "CREATE": "MATCH (b) CREATE (x:Leak) RETURN b",
    "SET": "MATCH (b) SET b.touched = true RETURN b",
    "two statements": "MATCH (b) RETURN b.text; MATCH (a) RETURN a.text",
    "query options": "CYPHER runtime=slotted MATCH (a) RETURN a.text",
    "EXPLAIN": "EXPLAIN MATCH (a) RETURN a.text",
    "reduce CPU bomb": "RETURN size(reduce(s='', x IN range(1,400000) | s+'aaaaaaaaaa'))",
    "regular expression": "MATCH (a) WHERE a.text =~ '(a+)+b' RETURN a.text",
    "aggregate across rows": "MATCH (a) RETURN count(a) AS n, collect(a.text) AS texts",
    "properties()": "MATCH (a)-[r]-(b) RETURN properties(a), properties(r), labels(b)",
    "nested negation": "RETURN " + "-(" * 150 + "1" + ")" * 150,
}


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> Iterator[Runtime]:
    settings = Settings(
        home=tmp_path_factory.mktemp("confine"), neo4j_uri=services.neo4j_uri(), **llm_settings(llm)
    )
    with installed_runtime(settings) as rt:
        _seed(rt)
        yield rt
        for dataset in (ALPHA, BETA):
            rt.graph.delete_dataset(dataset)


def _seed(rt: Runtime) -> None:
    """Each tenant: a document, a chunk, an entity; alpha's chunk holds the secret; one
    relationship of each dataset reaches the other's entity."""
    for dataset, text in ((ALPHA, f"The {SECRET} ledger is in Reykjavik."), (BETA, "Plain.")):
        doc, chunk, entity = (f"{kind}-{dataset}" for kind in ("doc", "chunk", "entity"))
        support = [Support(document_id=doc, chunk_id=chunk)]
        rt.graph.upsert_nodes(
            [
                Node(id=doc, type="Document", dataset=dataset, name=f"{dataset}.txt"),
                Node(
                    id=chunk,
                    type="DocumentChunk",
                    dataset=dataset,
                    support=support,
                    properties={"text": text, "document_id": doc},
                ),
                Node(id=entity, type="Entity", dataset=dataset, name=f"E {text}", support=support),
            ]
        )
        rt.graph.upsert_edges(
            [Edge(source=chunk, target=entity, name="MENTIONS", dataset=dataset, support=support)]
        )
    for source, target, dataset in ((ALPHA, BETA, ALPHA), (BETA, ALPHA, BETA)):
        rt.graph.upsert_edges(
            [
                Edge(
                    source=f"entity-{source}",
                    target=f"entity-{target}",
                    name="CROSSES",
                    dataset=dataset,
                )
            ]
        )


def context(rt: Runtime, raw: bool) -> RetrievalContext:
    ctx = rt.retrieval()
    ctx.cypher_raw = raw
    return ctx


def leaked(rows: object) -> bool:
    text = json.dumps(rows, default=str)
    return SECRET in text or ALPHA in text or "Reykjavik" in text


@pytest.mark.parametrize("name", list(BYPASSES))
def test_a_bypass_reads_nothing_of_another_tenant(runtime: Runtime, name: str) -> None:
    query = BYPASSES[name]
    try:
        response = search(context(runtime, raw=False), query, [BETA], SearchType.CYPHER, top_k=50)
    except (CypherScopeError, ReadOnlyViolation, CypherError) as err:
        assert not leaked(str(err)), err
        assert str(err).startswith(("refused", "the query", "Neo4j refused")), err
        print(f"| {name} | {query[:60]!r} | {str(err)[:100]} |")
        return
    rows = [json.loads(r.text) for r in response.results]
    assert not leaked(rows), rows
    assert not any(leaked(s.model_dump()) for r in response.results for s in r.sources)
    print(f"| {name} | {query[:60]!r} | ran: {len(rows)} rows: {json.dumps(rows)[:80]} |")


def test_the_same_reads_run_raw_do_find_the_secret(runtime: Runtime) -> None:
    """An operator's raw Cypher reads every tenant: the checks above can fail. The test
    database holds other tests' datasets too, so the unbounded reads keep to this run's two."""
    ctx = context(runtime, raw=True)
    runs = f"['{ALPHA}', '{BETA}']"
    for query in (
        f"MATCH (n) WHERE n.dataset IN {runs} RETURN n.dataset, n.text",
        BYPASSES["names the other dataset"],
        f"MATCH (b)-[r]-(a) WHERE a.dataset IN {runs} RETURN a.text, a.dataset, r.name",
    ):
        response = search(ctx, query, [BETA], SearchType.CYPHER, top_k=50)
        assert leaked([json.loads(r.text) for r in response.results]), query


def test_a_confined_query_still_reads_its_own_datasets(runtime: Runtime) -> None:
    query = "MATCH (c:DocumentChunk)-[:REL {name: 'MENTIONS'}]->(e:Entity) RETURN c.text, e.name"
    for dataset, expected in ((BETA, "Plain."), (ALPHA, SECRET)):
        response = search(context(runtime, raw=False), query, [dataset], SearchType.CYPHER)
        assert len(response.results) == 1 and expected in response.results[0].text


@pytest.mark.parametrize("name", ["label-less node", "traversal to the other tenant", "UNION"])
def test_natural_language_is_confined_too(runtime: Runtime, llm: LLMTestServer, name: str) -> None:
    # The test LLM writes the query the question quotes (tests/llm_answers.py).
    asked = f"Where is the ledger? Use `{BYPASSES[name]}`"
    try:
        response = search(context(runtime, raw=False), asked, [BETA], SearchType.NATURAL_LANGUAGE)
    except ValueError as err:  # the LLM's query refused three times
        assert "refused" in str(err) and not leaked(str(err)), err
        return
    assert not leaked([r.text for r in response.results]) and not leaked(response.answer)
