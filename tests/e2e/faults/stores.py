"""Everything a job leaves in the stores, read raw, and the comparison of two such snapshots.

Both runs of a comparison use the same dataset name (the first run's data is removed, and the
removal checked, before the second starts), so ids are compared as they are: nothing is
normalised away. Items are read without deduplication: an id stored twice is seen twice.

Kinds: `node` (every node of the dataset: labels, properties, support pairs), `support` (every
`_Support` node: the nodes it supports), `edge` (properties with the support lists), `vector`
(per collection: payload and the embedding rounded), `lexical` (every Redis key of the
dataset's postings, under the run's prefix), `job` (the finished job's counts).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from operator import sub
from typing import Any

import neo4j
import redis

from core.models.jobs import Job

Items = dict[str, dict[str, Any]]  # kind -> key -> value
# Job counts that two undisturbed runs do not share: the write time, and the vectors a batch
# wrote (a shared name's vector is skipped by whichever batch finds it stored: order-dependent;
# the vectors themselves are compared one by one).
VOLATILE = frozenset({"graph_write_ms", "vectors"})
# A property every writer of a shared node or edge overwrites (`SET n += props`): the last
# writer wins, so two undisturbed runs differ in it. Allowed to differ only when both values
# were written from one of the item's own supporting chunks (checked against their text).
LAST_WRITER_WINS = "description"
# When the store recorded a fact and learnt that it ended: system time, another in every run.
SYSTEM_TIMES = frozenset({"recorded_at", "retired_at", "_j_recorded_at", "_j_retired_at"})
VECTOR_LABEL = "CogmillVector"  # core/stores/neo4j/vectors.py, default namespace
VECTOR_PREFIX = "CogmillVec_"

_NODES = """MATCH (n:Node {dataset: $dataset})
RETURN n.id AS id, labels(n) AS labels, properties(n) AS props,
       [(n)<-[:SUPPORTS]-(p:_Support) | p.pair] AS support"""
_SUPPORT = """MATCH (p:_Support {dataset: $dataset})
RETURN p.key AS key, properties(p) AS props, [(p)-[:SUPPORTS]->(n) | n.id] AS nodes"""
_EDGES = """MATCH (a)-[r:REL {dataset: $dataset}]->(b)
RETURN r.id AS id, a.id AS source, b.id AS target, properties(r) AS props"""
_VECTORS = f"""MATCH (n:{VECTOR_LABEL} {{dataset: $dataset}})
RETURN n.id AS id, labels(n) AS labels, n.payload AS payload, n.embedding AS embedding"""


@dataclass
class Snapshot:
    """Items by kind; `repeated` lists keys stored more than once (duplicates by construction)."""

    items: Items = field(default_factory=dict)
    repeated: list[str] = field(default_factory=list)

    def add(self, kind: str, key: str, value: Any) -> None:
        bucket = self.items.setdefault(kind, {})
        if key in bucket:
            self.repeated.append(f"{kind} {key} stored more than once")
        bucket[key] = value

    def sizes(self) -> dict[str, int]:
        return {kind: len(values) for kind, values in sorted(self.items.items())}


def _pairs(kind: str, key: str, pairs: list[str], snap: Snapshot) -> list[str]:
    """A support list as a sorted list; a pair listed twice is a duplicate."""
    for pair, times in Counter(pairs).items():
        if times > 1:
            snap.repeated.append(f"{kind} {key} lists support {pair} {times} times")
    return sorted(set(pairs))


def read_graph(driver: neo4j.Driver, dataset: str, snap: Snapshot) -> None:
    with driver.session(database="neo4j") as session:
        for row in session.run(_NODES, dataset=dataset):
            props = dict(row["props"])
            snap.add(
                "node",
                row["id"],
                {
                    "labels": sorted(row["labels"]),
                    "props": props,
                    "support": _pairs("node", row["id"], row["support"], snap),
                },
            )
        for row in session.run(_SUPPORT, dataset=dataset):
            nodes = row["nodes"]
            if len(set(nodes)) != len(nodes):
                snap.repeated.append(f"support {row['key']} links a node twice")
            snap.add("support", row["key"], {"props": dict(row["props"]), "nodes": sorted(nodes)})
        for row in session.run(_EDGES, dataset=dataset):
            props = _world_time(dict(row["props"]))
            for name in ("_support", "_docs"):
                props[name] = _pairs("edge", row["id"], list(props.get(name, [])), snap)
            snap.add("edge", row["id"], {"ends": [row["source"], row["target"]], "props": props})
        for row in session.run(_VECTORS, dataset=dataset):
            collections = [x for x in row["labels"] if x.startswith(VECTOR_PREFIX)]
            collection = collections[0][len(VECTOR_PREFIX) :] if collections else "?"
            value = {
                "collections": sorted(collections),
                "payload": json.loads(row["payload"] or "{}"),
                "embedding": [round(float(x), 4) for x in row["embedding"] or []],
            }
            snap.add("vector", f"{collection}/{row['id']}", value)


def _world_time(props: dict[str, Any]) -> dict[str, Any]:
    """An edge's stored properties without the system times of its facts (when the store
    recorded each claim and the fact: another run records them at other times), its claims
    in a stable order (core/stores/neo4j/facts.py: [doc, chunk, start, end, recorded_at, ...])."""
    props = {k: v for k, v in props.items() if k not in SYSTEM_TIMES}
    if props.get("_claims") is not None:
        claims = [json.loads(c) for c in props["_claims"]]
        props["_claims"] = sorted(json.dumps([*c[:4], *c[5:]]) for c in claims)
    return props


def read_lexical(client: redis.Redis, prefix: str, dataset: str, snap: Snapshot) -> None:
    """Every key of the dataset's postings (core/stores/redis/lexical.py), without the prefix."""
    for raw in client.scan_iter(match=f"{prefix}lex:{dataset}:*", count=1000):
        key = raw.decode() if isinstance(raw, bytes) else raw
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "hash":
            value: Any = {_s(k): _s(v) for k, v in client.hgetall(key).items()}
        elif kind == "set":
            value = sorted(_s(m) for m in client.smembers(key))
        else:
            value = _s(client.get(key))
        snap.add("lexical", key[len(prefix) :], value)


def _s(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def read_job(job: Job, snap: Snapshot) -> None:
    for name, count in job.counts.items():
        if name not in VOLATILE:
            snap.add("job", name, count)
    snap.add("job", "status", job.status.value)
    snap.add("job", "errors", sorted(f"{e.document_name}: {e.step}" for e in job.errors))


def take(neo4j_uri: str, redis_url: str, prefix: str, dataset: str, job: Job | None) -> Snapshot:
    """The snapshot of a dataset: graph and vectors in Neo4j, postings in Redis, the job."""
    snap = Snapshot()
    with neo4j.GraphDatabase.driver(neo4j_uri, notifications_min_severity="OFF") as driver:
        read_graph(driver, dataset, snap)
    with redis.Redis.from_url(redis_url) as client:
        read_lexical(client, prefix, dataset, snap)
    if job is not None:
        read_job(job, snap)
    return snap


def is_empty(snap: Snapshot) -> bool:
    return not any(
        snap.items.get(kind) for kind in ("node", "support", "edge", "vector", "lexical")
    )


@dataclass
class Diff:
    """What the disturbed run has that the undisturbed one does not, and the reverse."""

    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    reordered: int = 0  # last-writer-wins descriptions that differ, each from its own chunks

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.changed)

    def summary(self, examples: int = 5) -> str:
        line = (
            f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, "
            f"{len(self.changed)} changed ({self.reordered} last-writer-wins descriptions "
            "differ, each written from one of the item's own chunks)"
        )
        shown = [
            f"  {what}: {item}"
            for what, items in (
                ("lost", self.lost),
                ("duplicated", self.duplicated),
                ("changed", self.changed),
            )
            for item in items[:examples]
        ]
        return "\n".join([line, *shown])


def compare(expected: Snapshot, actual: Snapshot) -> Diff:
    """Item by item: missing = lost, extra or stored twice = duplicated, different = changed."""
    diff = Diff(duplicated=list(actual.repeated))
    texts = {**_chunk_texts(expected), **_chunk_texts(actual)}
    for kind in sorted(set(expected.items) | set(actual.items)):
        want, got = expected.items.get(kind, {}), actual.items.get(kind, {})
        diff.lost += [f"{kind} {key}" for key in sorted(want.keys() - got.keys())]
        diff.duplicated += [
            f"{kind} {key} (not in the undisturbed run)" for key in sorted(got.keys() - want.keys())
        ]
        for key in sorted(want.keys() & got.keys()):
            if want[key] == got[key] or (kind == "vector" and _same_vector(want[key], got[key])):
                continue
            if _reordered(want[key], got[key], texts):
                diff.reordered += 1
            else:
                diff.changed.append(f"{kind} {key}: {_delta(want[key], got[key])}")
    return diff


def _same_vector(want: dict[str, Any], got: dict[str, Any]) -> bool:
    """The same payload and an embedding equal but for float noise: the local embedder's sums
    can take another order when a text shares its call with other texts, moving values by
    ~1e-7, which the rounding to 4 decimals can turn into 1e-4. Another text's vector
    differs by orders of magnitude more."""
    a, b = want.get("embedding", []), got.get("embedding", [])
    same_rest = {k: v for k, v in want.items() if k != "embedding"} == {
        k: v for k, v in got.items() if k != "embedding"
    }
    return same_rest and len(a) == len(b) and max(map(abs, map(sub, a, b)), default=0) <= 1e-3


def _chunk_texts(snap: Snapshot) -> dict[str, str]:
    return {
        key: str(node["props"].get("text", ""))
        for key, node in snap.items.get("node", {}).items()
        if node["props"].get("type") == "DocumentChunk"
    }


def _reordered(want: Any, got: Any, texts: dict[str, str]) -> bool:
    """Only the description differs, and each value is a sentence of a supporting chunk."""
    if not (isinstance(want, dict) and isinstance(got, dict)):
        return False  # a job count, a vector's payload string: no description in it
    a, b = want.get("props", {}), got.get("props", {})
    others = lambda p: {k: v for k, v in p.items() if k != LAST_WRITER_WINS}  # noqa: E731
    if others(a) != others(b) or {k: v for k, v in want.items() if k != "props"} != {
        k: v for k, v in got.items() if k != "props"
    }:
        return False
    pairs = want.get("support") or a.get("_support") or []
    chunks = [texts.get(json.loads(pair)[1], "") for pair in pairs]
    return all(
        any(str(p.get(LAST_WRITER_WINS, "")).removeprefix("Mentioned: ") in t for t in chunks)
        for p in (a, b)
    )


def _delta(want: Any, got: Any) -> str:
    """The first differing field, short."""
    if isinstance(want, dict) and isinstance(got, dict):
        for name in sorted(set(want) | set(got)):
            if want.get(name) != got.get(name):
                return f"{name}: {_delta(want.get(name), got.get(name))}"
    return f"{str(want)[:120]!s} -> {str(got)[:120]!s}"
