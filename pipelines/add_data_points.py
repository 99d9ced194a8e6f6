"""Step 4: write a batch's nodes and edges, embed their index fields, upsert the vectors."""

from __future__ import annotations

import time
from typing import ClassVar

from core.facts.functional import FunctionalRelations
from core.models.documents import DERIVED
from core.models.graph import Edge, Node
from core.models.lexical import LexicalDoc
from core.models.vectors import VectorPoint
from core.models.vocabulary import ALIAS, CHUNK, DOCUMENT, ENTITY, STRUCTURAL_EDGES
from core.ports import Embedder, GraphStore, LexicalIndex, VectorStore
from core.purge import purge_document
from core.sequences import batched
from pipelines.base import INGEST, StepContext, StepQueue, StepServices
from pipelines.built_graph import BuiltGraph
from pipelines.date_facts import DateFacts
from pipelines.graph_builder import build_graph
from pipelines.models import ExtractedBatch, WriteReport
from pipelines.resolve_entities import add_alias_nodes
from pipelines.summarize_documents import add_document_summaries


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
            relation_names=s.embed_relation_names,
            document_summaries=s.embed_document_summaries,
            facts=DateFacts.build(services, context),
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
        relation_names: bool = True,
        document_summaries: bool = True,
        facts: DateFacts | None = None,
    ) -> None:
        """`relation_names` / `document_summaries`: build and embed the relationship names'
        EdgeType nodes / embed the document summaries (core/settings/ says when to). `facts`
        dates the batch's relationships and marks the functional ones (default: the default
        functional relations)."""
        if embed_batch_size < 1 or write_batch_size < 1:
            raise ValueError(
                f"batch sizes must be >= 1, got embed={embed_batch_size} write={write_batch_size}"
            )
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.embed_batch_size, self.write_batch_size = embed_batch_size, write_batch_size
        self.lexical = lexical
        self.relation_names, self.document_summaries = relation_names, document_summaries
        self.facts = facts or DateFacts(FunctionalRelations())

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
        for doc in documents:
            if not doc.derived:
                continue  # nothing was ever written from it: no purge (a query per document)
            purge_document(self.graph, self.vectors, self.lexical, batch.dataset, doc.id)
        keep = [i for i, chunk in enumerate(batch.chunks) if chunk.document_id not in failed]
        graphs = self.facts.run(batch)  # each relationship dated, the functional ones grouped
        built = build_graph(
            batch.dataset,
            [batch.chunks[i] for i in keep],
            [graphs[i] for i in keep],
            node_sets={doc.id: doc.node_set for doc in documents if doc.node_set},
            events=[batch.events[i] for i in keep] if batch.events else None,
            relation_names=self.relation_names,
        )
        # Entity resolution's aliases and the document summaries (pipelines/resolve_entities.py,
        # pipelines/summarize_documents.py), for the documents that did not fail.
        aliases = [a for a in batch.aliases if a.document_id not in failed]
        add_alias_nodes(built, batch.dataset, aliases)
        summaries = [s for s in batch.document_summaries if s.document_id not in failed]
        add_document_summaries(built, batch.dataset, summaries, embed=self.document_summaries)
        # Vectors before the graph: a node is stored only once its vectors are. Names already
        # stored are embedded again: another batch's purge (a re-cognify) may delete the node
        # and its vector between a "stored?" check and this batch's graph write, which would
        # then recreate the node without a vector (seen 2 times in ~15 runs of test_jobs).
        vectors = self._write_vectors(batch.dataset, built)
        started = time.perf_counter()
        self._write_graph(built)
        graph_write_ms = round((time.perf_counter() - started) * 1000)
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
            alias_names={n.id: n.name for n in built.nodes.values() if n.type == ALIAS},
            nodes_written=len(built.nodes),
            edges_written=len(built.edges),
            graph_write_ms=graph_write_ms,
        )

    def write(self, dataset: str, built: BuiltGraph) -> int:
        """Write a built graph's nodes, edges and vectors (no purge); returns the vectors written.

        Steps that build their own graph in batches (pipelines/structured/link_rows.py) write
        through this.
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

    def _write_vectors(self, dataset: str, built: BuiltGraph) -> int:
        """Embed the built graph's index fields in one call, then upsert them per collection.

        One call over every collection lets the embedder group texts of similar length across
        chunks, summaries and names (padding is wasted work), and a text met more than once in
        the batch (a name in two collections, a summary equal to its chunk) is embedded once.
        """
        work = [
            (collection, list({item.id: item for item in items}.values()))
            for collection, items in built.to_embed.items()
        ]
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


def _is_entity(node: Node, built: BuiltGraph) -> bool:
    """Entities are Entity nodes, or under a custom graph model the nodes of its classes."""
    return node.type == ENTITY or node.type in built.custom_fields
