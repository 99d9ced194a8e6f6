"""Facts over time in the Neo4j graph store (see graph.py): claims on each relationship, and
the validity of the facts a write touched derived again in its transaction.

A relationship's claims are `_claims`, one JSON `["document","chunk",start,end,recorded_at,
from_document]`
per (document, chunk), unioned on write (a claim already kept stays) and filtered by document
prefix on delete, as `_support` is. Before a subject's group is read, the subject is
write-locked (in id order): concurrent batches writing facts of one subject serialise there,
and each reads the facts the other committed (core/stores/fact_intervals.py derives).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from neo4j import ManagedTransaction

from core.models.facts import FACT_GROUP, FACT_SIDE
from core.models.graph import Edge
from core.stores import fact_intervals
from core.stores.fact_intervals import Fact
from core.stores.neo4j import codec as codec
from core.stores.neo4j import queries as q
from core.stores.neo4j.connection import Rows

# [id, source, name, target, group, side] of a relationship `r` (and its claims, when read).
TIMED = "[r.id, startNode(r).id, r.name, endNode(r).id, r.fact_group, r.fact_side]"
GROUPED = f"""UNWIND $ids AS id MATCH (:Node {{id: id}})-[r:REL]-() WHERE r.fact_group IS NOT NULL
WITH DISTINCT r RETURN collect({TIMED} + [r._claims])"""
BY_KEY = f"""UNWIND $keys AS k
MATCH (:Node {{id: k[0]}})-[r:REL {{name: k[1]}}]->(:Node {{id: k[2]}})
RETURN collect({TIMED} + [r._claims])"""
SET_DERIVED = """UNWIND $rows AS row
MATCH (:Node {id: row.source})-[r:REL {name: row.name}]->(:Node {id: row.target})
SET r += row.props"""
# A timed row is [id, source, name, target, group, side].
Timed = Sequence[Any]


def claim_rows(edge: Edge, now: float) -> list[list[str]]:
    """`q.UPSERT_EDGES` claim rows: [the (document, chunk) prefix, the stored claim]."""
    rows = []
    for c in edge.claims:
        prefix = codec.strings(c.document_id, c.chunk_id)[:-1] + ","
        stored = [c.document_id, c.chunk_id, c.start, c.end, now, c.from_document]
        rows.append([prefix, codec.to_json(stored)])
    return rows


def timed(edges: Sequence[Edge]) -> list[list[Any]]:
    """Timed rows of the written edges that have claims or a group."""
    return [
        [
            e.id,
            e.source,
            e.name,
            e.target,
            e.properties.get(FACT_GROUP),
            e.properties.get(FACT_SIDE),
        ]
        for e in edges
        if e.claims or FACT_GROUP in e.properties
    ]


def now() -> float:
    return time.time()


def derive(tx: ManagedTransaction, changed: Sequence[Timed], gone: Iterable[str] = ()) -> None:
    """Derive again the validity of the facts of the subjects of the `changed` facts and of
    the ungrouped ones among them that are still stored (`gone`: nodes deleted)."""
    facts = [_fact(row) for row in changed]
    subjects = fact_intervals.subjects(facts) - set(gone)
    loose = sorted({(r[1], r[2], r[3]) for r in changed if not r[4]})
    if not subjects and not loose:
        return
    ends: dict[str, tuple[str, str, str]] = {}
    found = _read(tx, GROUPED, ends, ids=_locked(tx, subjects)) if subjects else []
    partners = fact_intervals.partners(found, subjects)
    if partners:
        found += _read(tx, GROUPED, ends, ids=_locked(tx, partners))
    if loose:
        found += _read(tx, BY_KEY, ends, keys=[list(k) for k in loose])
    derived = fact_intervals.validity(found, subjects)
    rows = [
        {
            "source": ends[i][0],
            "name": ends[i][1],
            "target": ends[i][2],
            "props": codec.encode(props),
        }
        for i, props in sorted(derived.items())
    ]
    if rows:
        tx.run(SET_DERIVED, rows=Rows(rows)).consume()


def _locked(tx: ManagedTransaction, ids: Iterable[str]) -> list[str]:
    """Write-lock the nodes in id order (a no-op for those this transaction holds already)."""
    ordered = sorted(ids)
    codec.value(tx, q.LOCK_ENDS, ids=ordered)
    return ordered


def _read(
    tx: ManagedTransaction, query: str, ends: dict[str, tuple[str, str, str]], **params: Any
) -> list[Fact]:
    """Facts with their claims; their (source, name, target) noted in `ends` by id."""
    facts = []
    for fact_id, source, name, target, group, side, stored in codec.value(tx, query, **params):
        if fact_id is None:  # deleted while read
            continue
        ends[fact_id] = (source, name, target)
        facts.append(
            Fact(fact_id, source, target, group or "", side or "", tuple(codec.claims_of(stored)))
        )
    return facts


def _fact(row: Timed) -> Fact:
    fact_id, source, _, target, group, side = row[:6]
    return Fact(fact_id, source, target, group or "", side or "")
