"""Turns extracted chunks into graph nodes, edges and the texts to embed (DESIGN.md data model).

Structural edges: chunk PART_OF document, chunk MENTIONS entity, entity IS_A entity type,
summary SUMMARIZES chunk. Every other edge name is a relationship between entities.
Everything built here is deduplicated within the batch and carries its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.models.extraction import KnowledgeGraph
from core.models.graph import (
    Edge,
    Node,
    Support,
    entity_id,
    entity_type_id,
    normalise_name,
    stable_id,
    summary_id,
)
from pipelines.models import Chunk

PART_OF, MENTIONS, IS_A, SUMMARIZES = "PART_OF", "MENTIONS", "IS_A", "SUMMARIZES"
STRUCTURAL_EDGES = frozenset({PART_OF, MENTIONS, IS_A, SUMMARIZES})

# Node type -> its fields embedded into the `<Type>_<field>` collections.
INDEX_FIELDS: dict[str, tuple[str, ...]] = {
    "DocumentChunk": ("text",),
    "Entity": ("name",),
    "TextSummary": ("text",),
    "EdgeType": ("relationship_name",),
}


def edge_type_id(dataset: str, name: str) -> str:
    """Relationship names are embedded once per dataset, keyed by name."""
    return stable_id("edge_type", dataset, name)


def relation_label(name: str) -> str:
    """Readable form of a relationship name, for embedding and display."""
    return name.replace("_", " ").strip()


@dataclass
class EmbedItem:
    id: str
    text: str
    payload: dict[str, str]


@dataclass
class BuiltGraph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: dict[tuple[str, str, str], Edge] = field(default_factory=dict)
    to_embed: dict[str, list[EmbedItem]] = field(default_factory=dict)

    def add_node(self, node: Node) -> None:
        existing = self.nodes.get(node.id)
        if existing is None:
            self.nodes[node.id] = node
            return
        existing.properties.update({k: v for k, v in node.properties.items() if v})
        _union(existing.support, node.support)

    def add_edge(self, edge: Edge) -> None:
        key = (edge.source, edge.name, edge.target)
        existing = self.edges.get(key)
        if existing is None:
            self.edges[key] = edge
            return
        _union(existing.support, edge.support)

    def embed(self, collection: str, item: EmbedItem) -> None:
        self.to_embed.setdefault(collection, []).append(item)


def _union(into: list[Support], more: list[Support]) -> None:
    seen = {(s.document_id, s.chunk_id) for s in into}
    into.extend(s for s in more if (s.document_id, s.chunk_id) not in seen)


def build_graph(dataset: str, chunks: list[Chunk], graphs: list[KnowledgeGraph]) -> BuiltGraph:
    """Nodes, edges and embedding work for a batch of extracted chunks."""
    built = BuiltGraph()
    for chunk, graph in zip(chunks, graphs, strict=True):
        _add_chunk(built, dataset, chunk, graph)
    for node in built.nodes.values():
        for field_name in INDEX_FIELDS.get(node.type, ()):
            text = node.name if field_name == "name" else str(node.properties.get(field_name, ""))
            if text.strip():
                built.embed(
                    f"{node.type}_{field_name}", EmbedItem(node.id, text, {"type": node.type})
                )
    return built


def _add_chunk(built: BuiltGraph, dataset: str, chunk: Chunk, graph: KnowledgeGraph) -> None:
    support = [Support(document_id=chunk.document_id, chunk_id=chunk.id)]
    built.add_node(
        Node(
            id=chunk.id,
            type="DocumentChunk",
            dataset=dataset,
            support=support,
            properties={
                "text": chunk.text,
                "index": chunk.index,
                "document_id": chunk.document_id,
                "document_name": chunk.document_name,
                "token_count": chunk.token_count,
            },
        )
    )
    built.add_edge(
        Edge(
            source=chunk.id,
            target=chunk.document_id,
            name=PART_OF,
            dataset=dataset,
            support=support,
        )
    )
    if graph.summary.strip():
        sid = summary_id(chunk.id)
        built.add_node(
            Node(
                id=sid,
                type="TextSummary",
                dataset=dataset,
                support=support,
                properties={"text": graph.summary},
            )
        )
        built.add_edge(
            Edge(source=sid, target=chunk.id, name=SUMMARIZES, dataset=dataset, support=support)
        )
    names: dict[str, str] = {}
    for entity in graph.entities:
        if not normalise_name(entity.name):
            continue
        eid = entity_id(dataset, entity.name)
        names[normalise_name(entity.name)] = eid
        tid = entity_type_id(dataset, entity.type)
        built.add_node(
            Node(
                id=eid,
                type="Entity",
                dataset=dataset,
                name=entity.name.strip(),
                support=support,
                properties={"description": entity.description},
            )
        )
        built.add_node(
            Node(id=tid, type="EntityType", dataset=dataset, name=entity.type, support=support)
        )
        built.add_edge(
            Edge(source=chunk.id, target=eid, name=MENTIONS, dataset=dataset, support=support)
        )
        built.add_edge(Edge(source=eid, target=tid, name=IS_A, dataset=dataset, support=support))
    for rel in graph.relationships:
        source, target = (
            names.get(normalise_name(rel.source)),
            names.get(normalise_name(rel.target)),
        )
        name = "_".join(rel.name.lower().split())
        if not source or not target or source == target:
            continue  # a relationship must join two distinct entities named in the same chunk
        built.add_edge(
            Edge(
                source=source,
                target=target,
                name=name,
                dataset=dataset,
                support=support,
                properties={"description": rel.description},
            )
        )
        built.embed(
            "EdgeType_relationship_name",
            EmbedItem(
                edge_type_id(dataset, name),
                relation_label(name),
                {"type": "EdgeType", "name": name},
            ),
        )
