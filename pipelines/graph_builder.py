"""Turns extracted chunks into graph nodes, edges and the texts to embed (DESIGN.md data model).

Structural edges: chunk PART_OF document, chunk MENTIONS entity, entity IS_A entity type,
summary SUMMARIZES chunk, entity type SUBCLASS_OF entity type (ontology classes, see
pipelines/align_ontology.py). Every other edge name is a relationship between entities.
Entities of a custom graph model's class (core/models/custom.py) get the class as node type.
Everything built here is deduplicated within the batch and carries its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.models.extraction import KnowledgeGraph, OntologyAlignment
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
from pipelines.models import Chunk, ExtractedEvent
from pipelines.temporal_builder import TEMPORAL_EDGES, add_events

PART_OF, MENTIONS, IS_A, SUMMARIZES = "PART_OF", "MENTIONS", "IS_A", "SUMMARIZES"
SUBCLASS_OF = "SUBCLASS_OF"
# Alias -ALIAS_OF-> Entity: a name that resolved to the entity (pipelines/resolve_entities.py).
ALIAS_OF = "ALIAS_OF"
# Property (and vector payload key) of chunks added to a node set.
NODE_SET = "node_set"
# Event edges (AT, DURING, INVOLVES) are structural too: they are not entity relationships.
STRUCTURAL_EDGES = (
    frozenset({PART_OF, MENTIONS, IS_A, SUMMARIZES, SUBCLASS_OF, ALIAS_OF}) | TEMPORAL_EDGES
)

# Tables (pipelines/structured.py): row IN_TABLE table is structural; row REFERENCES row (a
# foreign key) is a relation that graph search follows.
IN_TABLE, REFERENCES = "IN_TABLE", "REFERENCES"
STRUCTURAL_EDGES |= {IN_TABLE}

# A relationship name of a dataset: a node without edges whose vector (EdgeType_relationship_name)
# scores relations by name in graph search; its support is the chunks whose edges use the name.
EDGE_TYPE = "EdgeType"

# Node type -> its fields embedded into the `<Type>_<field>` collections.
INDEX_FIELDS: dict[str, tuple[str, ...]] = {
    "DocumentChunk": ("text",),
    "Entity": ("name",),
    "TextSummary": ("text",),
    EDGE_TYPE: ("relationship_name",),
    "Event": ("text",),
    "TableRow": ("text",),
    "Table": ("name",),
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
    # Custom graph model classes met in the batch -> their embedded fields.
    custom_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)

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


def build_graph(
    dataset: str,
    chunks: list[Chunk],
    graphs: list[KnowledgeGraph],
    node_sets: dict[str, str] | None = None,
    events: list[list[ExtractedEvent]] | None = None,
) -> BuiltGraph:
    """Nodes, edges and embedding work for a batch of extracted chunks.

    `node_sets` maps a document id to its node set: its chunks carry it as a property and in
    their vector payload, so a search can keep to one set (CODING_RULES).
    """
    built = BuiltGraph()
    node_sets = node_sets or {}
    for chunk, graph in zip(chunks, graphs, strict=True):
        _add_chunk(built, dataset, chunk, graph)
        if node_set := node_sets.get(chunk.document_id):
            built.nodes[chunk.id].properties[NODE_SET] = node_set
    if events:  # per chunk, from the temporal pipeline (pipelines/temporal_builder.py)
        add_events(built, dataset, chunks, graphs, events)
    for node in built.nodes.values():
        fields = INDEX_FIELDS.get(node.type) or built.custom_fields.get(node.type, ())
        if node.type in built.custom_fields and node.type not in INDEX_FIELDS:
            # The graph retrievers find entry points in Entity_name, custom classes included.
            built.embed("Entity_name", EmbedItem(node.id, node.name, {"type": node.type}))
        for field_name in fields:
            text = node.name if field_name == "name" else _text(node.properties.get(field_name))
            if text.strip():
                payload = {"type": node.type}
                if node.type == EDGE_TYPE:  # graph search weighs edges by their name's score
                    payload["name"] = node.name
                if NODE_SET in node.properties:
                    payload[NODE_SET] = node.properties[NODE_SET]
                built.embed(f"{node.type}_{field_name}", EmbedItem(node.id, text, payload))
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
    built.custom_fields.update({k: tuple(v) for k, v in graph.node_classes.items()})
    ontology = graph.ontology or OntologyAlignment()
    class_labels = {c.uri: c.label for c in ontology.classes}
    for entity in graph.entities:
        if not normalise_name(entity.name):
            continue
        eid = entity_id(dataset, entity.name)
        names[normalise_name(entity.name)] = eid
        # A type matched to an ontology class is that class's node, named by its label.
        type_name = class_labels.get(ontology.type_uris.get(entity.type, ""), entity.type)
        tid = entity_type_id(dataset, type_name)
        built.add_node(
            Node(
                id=eid,
                type=entity.type if entity.type in graph.node_classes else "Entity",
                dataset=dataset,
                name=entity.name.strip(),
                support=support,
                properties={"description": entity.description, **entity.properties},
            )
        )
        built.add_node(
            Node(id=tid, type="EntityType", dataset=dataset, name=type_name, support=support)
        )
        built.add_edge(
            Edge(source=chunk.id, target=eid, name=MENTIONS, dataset=dataset, support=support)
        )
        built.add_edge(Edge(source=eid, target=tid, name=IS_A, dataset=dataset, support=support))
        for uri in ontology.entity_classes.get(entity.name, ()):
            if uri in class_labels:  # the classes of the ontology individual it matched
                cid = entity_type_id(dataset, class_labels[uri])
                built.add_edge(
                    Edge(source=eid, target=cid, name=IS_A, dataset=dataset, support=support)
                )
    _add_ontology_classes(built, dataset, ontology, support)
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
        # The relation name's node (embedded below) carries the support of the chunks using the
        # name: deleting the last of them removes the node and, by its id, the name's vector.
        built.add_node(
            Node(
                id=edge_type_id(dataset, name),
                type=EDGE_TYPE,
                dataset=dataset,
                name=name,
                support=support,
                properties={"relationship_name": relation_label(name)},
            )
        )


def _add_ontology_classes(
    built: BuiltGraph, dataset: str, ontology: OntologyAlignment, support: list[Support]
) -> None:
    """Matched ontology classes and superclasses as EntityType nodes, child SUBCLASS_OF parent."""
    labels = {c.uri: c.label for c in ontology.classes}
    for ref in ontology.classes:
        cid = entity_type_id(dataset, ref.label)
        built.add_node(
            Node(
                id=cid,
                type="EntityType",
                dataset=dataset,
                name=ref.label,
                support=support,
                properties={"ontology_uri": ref.uri},
            )
        )
        for parent in ref.parents:
            if parent in labels and labels[parent] != ref.label:
                pid = entity_type_id(dataset, labels[parent])
                built.add_edge(
                    Edge(source=cid, target=pid, name=SUBCLASS_OF, dataset=dataset, support=support)
                )


def _text(value: object) -> str:
    """The text embedded for a property: list items joined, nothing for None."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)
