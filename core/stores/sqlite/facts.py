"""Facts over time in the embedded graph store (see graph.py): claims kept per (edge, document,
chunk) in the `claims` table, and the validity of the facts a write touched derived again in
the same transaction (core/stores/fact_intervals.py). Writers hold SQLite's one write lock, so
every derivation reads the others' committed facts."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Iterable, Sequence

from core.models.facts import FACT_GROUP, FACT_SIDE
from core.models.graph import Edge, FactClaim
from core.stores import fact_intervals
from core.stores.fact_intervals import Fact

SCHEMA = (
    # One claim per (edge, document, chunk): when that passage says the fact held, and when
    # the store first kept it (system time; a rewrite keeps the first).
    """CREATE TABLE IF NOT EXISTS claims (
        item_id TEXT NOT NULL, document_id TEXT NOT NULL, chunk_id TEXT NOT NULL,
        start_day INTEGER, end_day INTEGER, from_document INTEGER NOT NULL DEFAULT 0,
        recorded_at REAL NOT NULL,
        PRIMARY KEY (item_id, document_id, chunk_id)
    ) WITHOUT ROWID""",
)
ADD_CLAIM = """INSERT OR IGNORE INTO claims (item_id, document_id, chunk_id, start_day, end_day,
from_document, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)"""
_SET = "(SELECT value FROM json_each(?1))"
_GROUP = f"json_extract(properties, '$.{FACT_GROUP}')"
_FACT = f"SELECT id, source, target, {_GROUP}, json_extract(properties, '$.{FACT_SIDE}') FROM edges"
# The grouped facts of the subjects: two index walks (outgoing by key, incoming by target).
GROUPED = f"""{_FACT} WHERE source IN {_SET} AND {_GROUP} IS NOT NULL
UNION {_FACT} WHERE target IN {_SET} AND {_GROUP} IS NOT NULL"""
BY_ID = f"{_FACT} WHERE id IN {_SET}"
CLAIMS = f"""SELECT item_id, document_id, chunk_id, start_day, end_day, from_document, recorded_at
FROM claims
WHERE item_id IN {_SET} ORDER BY item_id, document_id, chunk_id"""
SET_DERIVED = "UPDATE edges SET properties = merge_properties(properties, ?2) WHERE id = ?1"


def _ids(ids: Iterable[str]) -> str:
    return json.dumps(list(ids))


def write_claims(conn: sqlite3.Connection, edges: Sequence[Edge]) -> None:
    """Keep the edges' claims (a claim already kept stays as it was) and derive again the
    validity of the facts they touch."""
    now = time.time()
    rows = [
        (e.id, c.document_id, c.chunk_id, c.start, c.end, c.from_document, now)
        for e in edges
        for c in e.claims
    ]
    if rows:
        conn.executemany(ADD_CLAIM, rows)
    timed = [e for e in edges if e.claims or FACT_GROUP in e.properties]
    if timed:
        subjects, loose = touched(conn, [e.id for e in timed])
        derive(conn, subjects, loose)


def touched(conn: sqlite3.Connection, edge_ids: Collection[str]) -> tuple[set[str], set[str]]:
    """The subjects whose groups these stored edges are in, and those of them in no group
    (each derived alone)."""
    facts = _facts(conn, conn.execute(BY_ID, (_ids(edge_ids),)), claims=False)
    return fact_intervals.subjects(facts), {f.id for f in facts if not f.group}


def derive(conn: sqlite3.Connection, subjects: Collection[str], loose: Collection[str]) -> None:
    """Write the validity of the subjects' grouped facts (and their partners') and of the
    `loose` edges still stored."""
    if not subjects and not loose:
        return
    facts = _facts(conn, conn.execute(GROUPED, (_ids(sorted(subjects)),)))
    partners = fact_intervals.partners(facts, subjects)
    if partners:
        facts += _facts(conn, conn.execute(GROUPED, (_ids(sorted(partners)),)))
    if loose:
        facts += _facts(conn, conn.execute(BY_ID, (_ids(sorted(loose)),)))
    found = fact_intervals.validity(facts, subjects)
    rows = [(edge_id, json.dumps(props)) for edge_id, props in sorted(found.items())]
    conn.executemany(SET_DERIVED, rows)


def drop_document(conn: sqlite3.Connection, document_id: str, edge_ids: Sequence[str]) -> None:
    """Forget what one document claimed about these edges."""
    query = f"DELETE FROM claims WHERE document_id = ?2 AND item_id IN {_SET}"
    conn.execute(query, (_ids(edge_ids), document_id))


def claims_of(conn: sqlite3.Connection, edge_ids: Collection[str]) -> dict[str, list[FactClaim]]:
    """The claims of each edge, read in one query."""
    found: dict[str, list[FactClaim]] = {i: [] for i in edge_ids}
    for item, doc, chunk, start, end, weak, recorded in conn.execute(CLAIMS, (_ids(found),)):
        found[item].append(
            FactClaim(
                document_id=doc,
                chunk_id=chunk,
                start=start,
                end=end,
                from_document=bool(weak),
                recorded_at=recorded,
            )
        )
    return found


def with_claims(conn: sqlite3.Connection, edges: list[Edge]) -> list[Edge]:
    """The edges with their claims read."""
    claims = claims_of(conn, [e.id for e in edges])
    for edge in edges:
        edge.claims = claims[edge.id]
    return edges


def _facts(conn: sqlite3.Connection, rows: Iterable[tuple], *, claims: bool = True) -> list[Fact]:
    """Facts from `_FACT` rows, with their claims when asked."""
    rows = list(rows)
    found = claims_of(conn, [r[0] for r in rows]) if claims else {}
    return [
        Fact(i, s, t, group or "", side or "", tuple(found.get(i, ())))
        for i, s, t, group, side in rows
    ]
