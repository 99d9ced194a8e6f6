"""Step 4: write a batch's nodes and edges, embed their index fields, upsert the vectors."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar

from core.models.documents import DERIVED
from core.models.graph import Edge, Node
from core.models.lexical import LexicalDoc
from core.models.vectors import VectorPoint
from core.models.vocabulary import (
    CHUNK,
    DOCUMENT,
    EDGE_TYPE,
    ENTITY,
    INDEX_FIELDS,
    STRUCTURAL_EDGES,
)
from core.models.vocabulary import collection as collection_of
from core.ports import Embedder, GraphStore, LexicalIndex, VectorStore, batched
from core.purge import purge_document
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.built_graph import BuiltGraph, EmbedItem
from pipelines.graph_builder import build_graph
from pipelines.models import ExtractedBatch, WriteReport
from pipelines.resolve_entities import add_alias_nodes
from pipelines.summarize_documents import add_document_summaries

# Nodes that many batches write whose vector depends on their name alone: once stored with
# a vector, embedding and upserting them again is wasted work (a third of the upserts at 1x).
SHARED_NAME_TYPES = frozenset({ENTITY, EDGE_TYPE})


class AddDataPoints:
    """Replaces what earlier runs derived from these documents with this run's graph and vectors.

    Purging first makes a re-run of a changed pipeline leave no stale facts; every write is an
    upsert on deterministic ids, so running the step twice leaves the same stores.
    """

    name: ClassVar[str] = "add_data_points"
    queue: ClassVar[StepQueue] = INGEST

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> AddDataPoints:
        """Writing to the process's graph, vectors and lexical index in the settings' batches."""
        s = services.settings
        return cls(
            services.graph,
            services.vectors,
            services.embedder,
            embed_batch_size=s.embed_batch_size,
            write_batch_size=s.write_batch_size,
            lexical=services.lexical,
        )

    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        embedder: Embedder,
        *,
        embed_batch_size: int = 64,
        write_batch_size: int = 2000,
        lexical: LexicalIndex | None = None,
    ) -> None:
        if embed_batch_size < 1 or write_batch_size < 1:
            raise ValueError(
                f"batch sizes must be >= 1, got embed={embed_batch_size} write={write_batch_size}"
            )
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.embed_batch_size, self.write_batch_size = embed_batch_size, write_batch_size
        self.lexical = lexical

    def run(self, batch: ExtractedBatch) -> WriteReport:
        failed = {error.document_id for error in batch.errors}
        documents = [doc for doc in batch.documents if doc.id not in failed]
        fresh = [doc for doc in documents if not doc.derived]
        if fresh:  # from now on a crash leaves derived data: a later run must purge first
            self.graph.upsert_nodes(
                [
                    Node(
                        id=d.id,
                        type=DOCUMENT,
                        dataset=batch.dataset,
                        properties={DERIVED: True},
                    )
                    for d in fresh
                ]
            )
        purged: list[str] = []
        for doc in documents:
            if not doc.derived:
                continue  # nothing was ever written from it: no purge (a query per document)
            removed = purge_document(self.graph, self.vectors, self.lexical, batch.dataset, doc.id)
            purged += removed.node_ids
        if purged:
            self._restore_name_vectors(batch.dataset, purged)
        keep = [i for i, chunk in enumerate(batch.chunks) if chunk.document_id not in failed]
        built = build_graph(
            batch.dataset,
            [batch.chunks[i] for i in keep],
            [batch.graphs[i] for i in keep],
            node_sets={doc.id: doc.node_set for doc in documents if doc.node_set},
            events=[batch.events[i] for i in keep] if batch.events else None,
        )
        # Entity resolution's aliases and the document summaries (pipelines/resolve_entities.py,
        # pipelines/summarize_documents.py), for the documents that did not fail.
        aliases = [a for a in batch.aliases if a.document_id not in failed]
        add_alias_nodes(built, batch.dataset, aliases)
        summaries = [s for s in batch.document_summaries if s.document_id not in failed]
        add_document_summaries(built, batch.dataset, summaries)
        # Vectors before the graph: a node is stored only once its vectors are. Names stored
        # with a vector already (most entity and relation names) are not embedded again. Another
        # batch's purge (a re-cognify) may delete such a node and its vector between that look-up
        # and this graph write, which then recreates the node: so the names are looked up again
        # after the write and the missing ones written, and a purge gives back the vectors of
        # names another batch wrote again meanwhile (`_restore_name_vectors`).
        names = self._names(built)
        vectors = self._write_vectors(batch.dataset, built, skip=self._stored(names))
        started = time.perf_counter()
        self._write_graph(built)
        graph_write_ms = round((time.perf_counter() - started) * 1000)
        vectors += self._upsert(batch.dataset, self._missing(names))
        self._index_terms(batch.dataset, built)
        relations = [e for e in built.edges.values() if e.name not in STRUCTURAL_EDGES]
        return WriteReport(
            dataset=batch.dataset,
            documents=[doc.id for doc in documents],
            chunks=sum(1 for n in built.nodes.values() if n.type == CHUNK),
            entities=sum(1 for n in built.nodes.values() if _is_entity(n, built)),
            relationships=len(relations),
            vectors=vectors,
            errors=list(batch.errors),
            entity_names={n.id: n.name for n in built.nodes.values() if n.type == ENTITY},
            nodes_written=len(built.nodes),
            edges_written=len(built.edges),
            graph_write_ms=graph_write_ms,
        )

    def write(self, dataset: str, built: BuiltGraph) -> int:
        """Write a built graph's nodes, edges and vectors (no purge); returns the vectors written.

        Steps that build their own graph in batches (pipelines/structured.py) write through this.
        """
        self._write_graph(built)
        return self._write_vectors(dataset, built)

    def _write_graph(self, built: BuiltGraph) -> None:
        for nodes in batched(list(built.nodes.values()), self.write_batch_size):
            self.graph.upsert_nodes(nodes)
        # Sorted edge batches keep lock order stable on servers that lock both endpoints.
        edges: list[Edge] = sorted(built.edges.values(), key=lambda e: (e.source, e.target, e.name))
        for chunk in batched(edges, self.write_batch_size):
            self.graph.upsert_edges(chunk)

    def _index_terms(self, dataset: str, built: BuiltGraph) -> None:
        """BM25 postings of the chunks written (CHUNKS_LEXICAL), after the graph holds them."""
        if self.lexical is None:
            return
        docs = [
            LexicalDoc(node.id, str(node.properties.get("document_id", "")), str(text))
            for node in built.nodes.values()
            if node.type == CHUNK and (text := node.properties.get("text"))
        ]
        self.lexical.add(dataset, docs)

    def _write_vectors(
        self, dataset: str, built: BuiltGraph, skip: Mapping[str, set[str]] | None = None
    ) -> int:
        """Embed the built graph's index fields, except the ids `skip` names per collection."""
        skip = skip or {}
        return self._upsert(
            dataset,
            [
                (collection, [i for i in unique.values() if i.id not in skip.get(collection, ())])
                for collection, items in built.to_embed.items()
                if (unique := {item.id: item for item in items})
            ],
        )

    def _upsert(self, dataset: str, work: list[tuple[str, list[EmbedItem]]]) -> int:
        """Embed the items in one call, then upsert them per collection; the points written.

        One call over every collection lets the embedder group texts of similar length across
        chunks, summaries and names (padding is wasted work), and a text met more than once in
        the batch (a name in two collections, a summary equal to its chunk) is embedded once.
        """
        texts = list(dict.fromkeys(item.text for _, items in work for item in items))
        if not texts:
            return 0
        row = {text: i for i, text in enumerate(texts)}
        vectors = self.embedder.embed(texts)
        total = 0
        for collection, items in work:
            for part in batched(items, self.embed_batch_size * 8):
                points = [
                    VectorPoint(
                        id=item.id,
                        vector=vectors[row[item.text]].tolist(),
                        dataset=dataset,
                        payload=item.payload,
                    )
                    for item in part
                ]
                self.vectors.upsert(collection, points)
                total += len(points)
        return total

    def _names(self, built: BuiltGraph) -> dict[str, list[EmbedItem]]:
        """The embed items of shared names (entities, relation names) per collection: nodes
        that many batches write, whose vector depends on their name alone."""
        names: dict[str, list[EmbedItem]] = {}
        for collection, items in built.to_embed.items():
            for item in items:
                node = built.nodes.get(item.id)
                if node is not None and node.type in SHARED_NAME_TYPES:
                    names.setdefault(collection, []).append(item)
        return names

    def _stored(self, names: Mapping[str, list[EmbedItem]]) -> dict[str, set[str]]:
        """The ids of `names` stored with a vector already, per collection, in one read; none
        when the vector store cannot tell (every name is embedded then, as before)."""
        existing = getattr(self.vectors, "existing", None)
        if existing is None or not names:
            return {}
        found: dict[str, set[str]] = existing({c: [i.id for i in it] for c, it in names.items()})
        return found

    def _missing(self, names: Mapping[str, list[EmbedItem]]) -> list[tuple[str, list[EmbedItem]]]:
        """After the graph write: the names whose vector is not stored (a purge took it after
        the look-up before the write); [] when the vector store cannot tell."""
        if getattr(self.vectors, "existing", None) is None:
            return []
        stored = self._stored(names)
        work = [
            (c, list({i.id: i for i in items if i.id not in stored.get(c, ())}.values()))
            for c, items in names.items()
        ]
        return [(c, items) for c, items in work if items]

    def _restore_name_vectors(self, dataset: str, purged: list[str]) -> None:
        """After this batch's purges: the shared names among the nodes they removed that are
        stored again (another batch wrote them between the purge's graph and vector deletes,
        and may have found their vector still there) get their vector back."""
        back = self.graph.existing(purged)
        if not back:
            return
        work: dict[str, list[EmbedItem]] = {}
        for node in self.graph.get_nodes(sorted(back)):
            if node.type not in SHARED_NAME_TYPES:
                continue
            # As pipelines/graph_builder.py embeds them: the name, or a field of the node.
            payload = {"type": node.type, **({"name": node.name} if node.type == EDGE_TYPE else {})}
            for field_name in INDEX_FIELDS.get(node.type, ()):
                text = node.name if field_name == "name" else node.properties.get(field_name)
                if isinstance(text, str) and text.strip():
                    item = EmbedItem(node.id, text, payload)
                    work.setdefault(collection_of(node.type, field_name), []).append(item)
        self._upsert(dataset, list(work.items()))


def _is_entity(node: Node, built: BuiltGraph) -> bool:
    """Entities are Entity nodes, or under a custom graph model the nodes of its classes."""
    return node.type == ENTITY or node.type in built.custom_fields
