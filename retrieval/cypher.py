"""CYPHER (the caller's query) and NATURAL_LANGUAGE (the LLM's query), read-only, on Neo4j.

Read-only twice over: queries with write clauses or write/admin procedures are refused here
with a message naming the clause, and what passes runs in a READ access-mode transaction, so
the server refuses any write the check missed.

Scoping: a query sees the whole database; every node has a `dataset` property, and the
searched datasets are passed as the `$datasets` parameter, e.g.
`MATCH (c:DocumentChunk) WHERE c.dataset IN $datasets RETURN c LIMIT 5`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from core.errors import NotConfigured
from core.models.graph import Node
from core.models.vocabulary import CHUNK
from core.ports import CypherError, CypherRunner
from core.stores.factory import NO_CYPHER
from retrieval.answer import CompletionMixin, ask
from retrieval.base import RetrievalContext
from retrieval.chunks import chunk_source
from retrieval.cypher_guard import ReadOnlyViolation, check_read_only
from retrieval.models import SearchResult, Source

MAX_SUPPORT_SOURCES = 5


def cypher_runner(ctx: RetrievalContext) -> CypherRunner:
    """The runtime's read-only Cypher runner (made by the store factory, kept open by the
    runtime); NotConfigured where the graph has no Cypher (the embedded SQLite graph)."""
    if ctx.cypher is None:
        raise NotConfigured(NO_CYPHER)
    return ctx.cypher()


class CypherRetriever:
    """The rows of the caller's read-only Cypher (the query is the search text)."""

    kind = "CYPHER"

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        check_read_only(query)
        rows = cypher_runner(self.ctx).run_read(query, {"datasets": list(datasets)}, top_k)
        return self.results(rows)

    def results(self, rows: list[dict[str, Any]]) -> list[SearchResult]:
        """Rows as results (text = the row as JSON), with the chunks behind their nodes."""
        in_rows = [_node_ids(row) for row in rows]
        graph = self.ctx.graph
        nodes = {n.id: n for n in graph.get_nodes(sorted({i for ids in in_rows for i in ids}))}
        # Chunks a row's nodes stand on: chunk nodes themselves, else their support.
        wanted = [
            list(dict.fromkeys(c for i in ids if i in nodes for c in _chunks_of(nodes[i])))
            for ids in in_rows
        ]
        chunks = {n.id: n for n in graph.get_nodes(sorted({c for ids in wanted for c in ids}))}
        results = []
        for rank, (row, ids) in enumerate(zip(rows, wanted, strict=True)):
            sources: list[Source] = [chunk_source(chunks[c]) for c in ids if c in chunks]
            text = json.dumps(row, ensure_ascii=False, default=str)
            results.append(SearchResult(text=text, score=1.0 / (rank + 1), sources=sources))
        return results


def _node_ids(value: Any) -> list[str]:
    """Ids of the graph nodes in a row (the runner gives each node its labels)."""
    found: list[str] = []
    if isinstance(value, dict):
        if "labels" in value and isinstance(value.get("id"), str):
            found.append(value["id"])
        for item in value.values():
            found.extend(_node_ids(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_node_ids(item))
    return found


def _chunks_of(node: Node) -> list[str]:
    """The chunk a chunk node is, or the first chunks that support any other node."""
    if node.type == CHUNK:
        return [node.id]
    return [s.chunk_id for s in node.support if s.chunk_id][:MAX_SUPPORT_SOURCES]


class CypherQuery(BaseModel):
    """The LLM's reply for NATURAL_LANGUAGE: one read-only Cypher query."""

    cypher: str = Field(description="One read-only Cypher query (MATCH ... RETURN ... LIMIT)")


# The schema shown to the LLM is read from the searched datasets only ($datasets): another
# dataset's relationship names, types and fields are its content (extracted from its text).
# A node's type label is its `type` (neo4j/graph.py); labels starting with "_" are cogmill's own
# bookkeeping (its _Support nodes). Each read goes through the (dataset, type, id) index or the
# relationships' dataset index.
SCHEMA_QUERIES = {
    "labels": "CALL db.labels() YIELD label WITH label "
    "WHERE NOT label STARTS WITH '_' AND label <> 'Node' "
    "CALL (label) { UNWIND $datasets AS d MATCH (n:Node {dataset: d, type: label}) "
    "WHERE n.id IS NOT NULL RETURN n.id AS hit LIMIT 1 } "
    "RETURN ['Node'] + collect(label) AS v",
    # Fields of a sample of each type's nodes (a hint for the LLM, not a census).
    "properties": "UNWIND $datasets AS d UNWIND $types AS t "
    "CALL (d, t) { MATCH (n:Node {dataset: d, type: t}) WHERE n.id IS NOT NULL "
    "RETURN n LIMIT 50 } UNWIND keys(n) AS key WITH DISTINCT key "
    "WHERE NOT key STARTS WITH '_' RETURN collect(key) AS v",
    "relationships": "MATCH ()-[r:REL]->() WHERE r.dataset IN $datasets "
    "WITH r.name AS name LIMIT 20000 RETURN collect(DISTINCT name)[..80] AS v",
}
NL_PROMPT = """You write one read-only Cypher query for Neo4j 5 that answers the question.
The graph: every node has the label Node plus a label for its type, and properties id, type,
dataset, name. Chunks of documents are (:DocumentChunk {{text, document_id, document_name}}),
entities are (:Entity {{name, description}}), summaries (:TextSummary {{text}}).
Every relationship has the type REL and its meaning in the property `name`:
(chunk)-[:REL {{name:'PART_OF'}}]->(document), (chunk)-[:REL {{name:'MENTIONS'}}]->(entity),
(entity)-[:REL {{name:'IS_A'}}]->(entity type), (summary)-[:REL {{name:'SUMMARIZES'}}]->(chunk),
and (entity)-[:REL {{name: <relationship>}}]->(entity) for facts.
Node labels in use: {labels}
Property keys in use: {properties}
Relationship names in use: {relationships}
Rules: only MATCH/OPTIONAL MATCH/WITH/WHERE/RETURN/ORDER BY/LIMIT; never write; restrict
nodes to the searched datasets with `n.dataset IN $datasets`; end with LIMIT {limit}."""


def read_schema(runner: CypherRunner, datasets: Sequence[str]) -> dict[str, list[str]]:
    """The labels, property keys and relationship names in use in the datasets."""
    scope: dict[str, Any] = {"datasets": list(datasets)}
    schema = {"labels": runner.run_read(SCHEMA_QUERIES["labels"], scope, 1)[0]["v"]}
    scope["types"] = [label for label in schema["labels"] if label != "Node"]
    for key in ("properties", "relationships"):
        schema[key] = runner.run_read(SCHEMA_QUERIES[key], scope, 1)[0]["v"]
    return schema


class NaturalLanguageRetriever(CompletionMixin, CypherRetriever):
    """Rows of a Cypher query the LLM writes from the live schema, retried with its error."""

    kind = "NATURAL_LANGUAGE"
    max_retries = 2

    def __init__(self, ctx: RetrievalContext) -> None:
        super().__init__(ctx)
        self.cypher: str | None = None  # the query that produced the last results

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        if self.ctx.llm is None:
            raise NotConfigured(
                "NATURAL_LANGUAGE needs an LLM to write Cypher: set COGMILL_LLM_BASE_URL, "
                "or write the query yourself with the CYPHER search type"
            )
        runner = cypher_runner(self.ctx)
        schema = read_schema(runner, datasets)
        system = NL_PROMPT.format(limit=top_k, **{k: ", ".join(v) for k, v in schema.items()})
        messages: list[dict[str, str]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Question: {query.strip()}"},
        ]
        for attempt in range(self.max_retries + 1):
            reply = ask(self.ctx, messages, CypherQuery)
            try:
                check_read_only(reply.cypher)
                rows = runner.run_read(reply.cypher, {"datasets": list(datasets)}, top_k)
            except (CypherError, ReadOnlyViolation) as err:
                if attempt == self.max_retries:
                    raise CypherError(
                        f"NATURAL_LANGUAGE: the LLM's Cypher failed {attempt + 1} times; "
                        f"last query {reply.cypher!r}: {err}"
                    ) from err
                messages += [
                    {"role": "assistant", "content": reply.model_dump_json()},
                    # Neo4j's own words tell the LLM more than ours do; they stay server-side.
                    {"role": "user", "content": f"That query failed: {err.detail or err}\nFix it."},
                ]
                continue
            self.cypher = reply.cypher
            return self.results(rows)
        raise AssertionError("unreachable")  # the loop returns or raises
