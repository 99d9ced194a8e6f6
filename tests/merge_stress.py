"""Entity merges under concurrent batches, compared with a serial run of the same input.

Many one-document batches share entity names in several forms ("NYC" / "New York City",
"J. Smith" / "John Smith", "IBM" / "International Business Machines") beside namesakes the
alias rules must keep apart ("Maria Lopez" / "Carlos Lopez", "John Smith" / "Mary Smith").
Each batch runs the steps that write and merge entities, as a worker runs them:
resolve_entities -> add_data_points -> reconcile_entities, on real stores. A run ingests every
batch, then re-runs every batch as a re-cognify does (each first purges its document), so
merges race both writes and purges. Several writers (threads, each with its own store
connections on Neo4j, as worker processes have) take the batches from one queue in a
shuffled order; the final graph must equal that of one writer taking them in order: every
node id with its properties and support, every edge id with its properties and support, and
the number of vectors per collection. No batch may fail.

The extraction is given, not run (the subject is the write path): every form of a name has
one type and description, and a relationship name one description, so that the property
values writers agree on leave last-writer-wins nothing to decide.

Used by tests/integration/test_merge_stress.py (a few runs) and bench/merge_stress.py (50).
"""

from __future__ import annotations

import hashlib
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.facts import RECORDED_AT, RETIRED_AT
from core.models.graph import chunk_id, document_id
from core.models.vocabulary import INDEX_FIELDS
from core.ports import Embedder
from core.settings import Settings
from pipelines.add_data_points import AddDataPoints
from pipelines.models import Chunk, DocumentRef, ExtractedBatch
from pipelines.reconcile_entities import ReconcileEntities
from pipelines.resolve_entities import ResolveEntities
from runtime import Runtime

# Forms of one entity -> (type, description). Forms of one entity share both.
ENTITIES: dict[tuple[str, ...], tuple[str, str]] = {
    ("New York City", "NYC"): ("City", "a city on the Hudson"),
    ("John Smith", "J. Smith"): ("Person", "an engineer"),
    ("Mary Smith",): ("Person", "a lawyer"),  # a namesake of John's: never merged with him
    ("Maria Lopez", "Prof. Maria Lopez", "M. Lopez"): ("Person", "a physicist"),
    ("Carlos Lopez",): ("Person", "a carpenter"),  # Maria's namesake
    ("International Business Machines", "IBM"): ("Organization", "a computer maker"),
    ("United States", "U.S."): ("Country", "a country"),
    ("Boston",): ("City", "a port city"),
    ("Columbia University",): ("Organization", "a university"),
}
RELATIONS = {
    "lives_in": "lives in",
    "works_for": "works for",
    "knows": "knows",
    "located_in": "is located in",
}


@dataclass(frozen=True)
class Corpus:
    """The documents of a run, one batch each, in the serial order."""

    dataset: str
    batches: list[ExtractedBatch]

    def rerun(self) -> list[ExtractedBatch]:
        """The same batches as a re-cognify plans them: each purges what its document wrote."""
        return [
            b.model_copy(
                update={"documents": [d.model_copy(update={"derived": True}) for d in b.documents]}
            )
            for b in self.batches
        ]


def make_corpus(dataset: str, documents: int = 24, seed: int = 12) -> Corpus:
    """`documents` one- or two-chunk documents, each chunk naming 3-4 entities in random forms."""
    rng = random.Random(seed)
    groups = list(ENTITIES.items())
    batches = []
    for d in range(documents):
        graphs = [_chunk_graph(rng, groups) for _ in range(rng.choice((1, 1, 2)))]
        texts = [_text(g) for g in graphs]
        doc_id = document_id(dataset, hashlib.sha256("\n".join(texts).encode()).hexdigest())
        name = f"doc{d:03}.txt"
        chunks = [
            Chunk(
                id=chunk_id(doc_id, i),
                document_id=doc_id,
                document_name=name,
                index=i,
                text=text,
                token_count=len(text.split()),
            )
            for i, text in enumerate(texts)
        ]
        ref = DocumentRef(id=doc_id, dataset=dataset, name=name, blob_key="", derived=False)
        batches.append(
            ExtractedBatch(dataset=dataset, documents=[ref], chunks=chunks, graphs=graphs)
        )
    return Corpus(dataset, batches)


def _chunk_graph(rng: random.Random, groups: list) -> KnowledgeGraph:
    picked = rng.sample(groups, rng.choice((3, 4)))
    entities = [
        ExtractedEntity(name=rng.choice(forms), type=type_, description=description)
        for forms, (type_, description) in picked
    ]
    relationships = [
        ExtractedRelationship(source=a.name, target=b.name, name=name, description=RELATIONS[name])
        for a, b in zip(entities, entities[1:], strict=False)
        for name in [rng.choice(sorted(RELATIONS))]
    ]
    summary = f"About {', '.join(e.name for e in entities)}."
    return KnowledgeGraph(entities=entities, relationships=relationships, summary=summary)


def _text(graph: KnowledgeGraph) -> str:
    return " ".join(f"{r.source} {RELATIONS[r.name]} {r.target}." for r in graph.relationships)


class MemoEmbedder:
    """The real embedder, each distinct text embedded once: runs repeat the same texts, and
    the vectors are the model's own (the embedder is deterministic)."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner, self.dim, self.model_name = embedder, embedder.dim, embedder.model_name
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            new = sorted({t for t in texts if t not in self._vectors})
            if new:
                self._vectors.update(zip(new, self.inner.embed(new), strict=True))
            return np.stack([self._vectors[t] for t in texts])


@dataclass
class Writer:
    """One worker's steps over its own store connections."""

    runtime: Runtime
    embedder: Embedder
    steps: list[Callable[[Any], Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rt = self.runtime
        self.steps = [
            ResolveEntities(rt.graph).run,
            AddDataPoints(rt.graph, rt.vectors, self.embedder).run,
            ReconcileEntities(
                rt.graph,
                rt.vectors,
                self.embedder,
                rt.entity_keys,
                threshold=rt.settings.entity_match_threshold,
            ).run,
        ]

    def run(self, batch: ExtractedBatch) -> None:
        value: Any = batch
        for step in self.steps:
            value = step(value)


@dataclass
class RunResult:
    seconds: float
    errors: list[str]
    snapshot: dict[str, Any]


def run_corpus(
    corpus: Corpus, writers: Sequence[Writer], *, order_seed: int | None = None
) -> RunResult:
    """Ingest then re-run every batch with these writers (in order for one writer with no
    seed; otherwise shuffled, the writers pulling from one queue); the final graph."""
    started, errors = time.perf_counter(), []
    for batches in (corpus.batches, corpus.rerun()):
        errors += _drain(list(batches), writers, order_seed)
    graph, vectors = writers[0].runtime.graph, writers[0].runtime.vectors
    return RunResult(
        time.perf_counter() - started, errors, snapshot(graph, vectors, corpus.dataset)
    )


def _drain(batches: list[ExtractedBatch], writers: Sequence[Writer], seed: int | None) -> list[str]:
    if seed is not None:
        random.Random(seed).shuffle(batches)
    todo: queue.SimpleQueue[ExtractedBatch] = queue.SimpleQueue()
    for batch in batches:
        todo.put(batch)
    errors: list[str] = []
    start = threading.Barrier(len(writers))

    def work(writer: Writer) -> None:
        start.wait()
        while True:
            try:
                batch = todo.get_nowait()
            except queue.Empty:
                return
            try:
                writer.run(batch)
            except Exception as err:  # every failed batch is reported, none stops the run
                errors.append(f"{batch.documents[0].name}: {type(err).__name__}: {err}")

    threads = [threading.Thread(target=work, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def snapshot(graph: Any, vectors: Any, dataset: str) -> dict[str, Any]:
    """Every node and edge of the dataset with properties and support; vectors per collection."""
    counts = graph.count(dataset)
    nodes = {
        n.id: (n.type, n.name, n.properties, _pairs(n))
        for kind in sorted(counts)
        if kind != "edges"
        for n in graph.find_nodes(dataset, kind, limit=1_000_000)
    }
    edges = {
        e.id: (e.source, e.name, e.target, world_time(e.properties), _pairs(e))
        for e in graph.edges_of(sorted(nodes), limit=10_000_000)
    }
    collections = sorted(f"{t}_{f}" for t, fields in INDEX_FIELDS.items() for f in fields)
    counted = {c: vectors.count(c, dataset=dataset) for c in collections}
    return {"nodes": nodes, "edges": edges, "vectors": {c: n for c, n in counted.items() if n}}


def world_time(properties: dict[str, Any]) -> dict[str, Any]:
    """An edge's properties without the system times of its facts (when the store recorded
    them: another run records them at other times; core/models/facts.py)."""
    return {k: v for k, v in properties.items() if k not in (RECORDED_AT, RETIRED_AT)}


def _pairs(item: Any) -> list[tuple[str, str]]:
    return sorted({(s.document_id, s.chunk_id) for s in item.support})


def differences(expected: dict[str, Any], found: dict[str, Any], limit: int = 5) -> list[str]:
    """A few lines saying how two snapshots differ ([] when they are equal)."""
    lines = []
    for part in ("nodes", "edges", "vectors"):
        want, got = expected[part], found[part]
        for key in sorted(want.keys() | got.keys()):
            if want.get(key) != got.get(key):
                lines.append(f"{part} {key}: serial {want.get(key)!r} vs this run {got.get(key)!r}")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more"]
    return lines


def distributed_settings(home: Any, neo4j_uri: str, redis_url: str, prefix: str) -> Settings:
    """Settings of the distributed stores (Neo4j graph and vectors, Redis state)."""
    return Settings(
        home=home,
        neo4j_uri=neo4j_uri,
        vector_store="neo4j",
        redis_url=redis_url,
        redis_prefix=prefix,
    )


@contextmanager
def writers_on(settings: Settings, count: int, embedder: Embedder) -> Iterator[list[Writer]]:
    """`count` writers: on Neo4j each with its own runtime (drivers), as worker processes
    have; on the embedded stores one runtime shared, as the threads of one process share it."""
    with ExitStack() as stack:
        runtimes = [Runtime(settings) for _ in range(count if settings.neo4j_uri else 1)]
        for rt in runtimes:
            stack.callback(rt.close)
        yield [Writer(runtimes[i % len(runtimes)], embedder) for i in range(count)]


def forget(runtime: Runtime, dataset: str) -> None:
    """Remove a dataset from the graph, vectors and entity key index (between runs)."""
    runtime.graph.delete_dataset(dataset)
    runtime.vectors.delete_dataset(dataset)
    runtime.entity_keys.forget_dataset(dataset)
