"""Turns extracted chunks into graph nodes, edges and the texts to embed (see the data model in
docs/architecture.md).

Structural edges: chunk PART_OF document, chunk MENTIONS entity, entity IS_A entity type,
summary SUMMARIZES chunk, entity type SUBCLASS_OF entity type (ontology classes, see
pipelines/align_ontology.py). Every other edge name is a relationship between entities.
Entities of a custom graph model's class (core/models/custom.py) get the class as node type.
Everything built here is deduplicated within the batch and carries its provenance.
"""

from __future__ import annotations

from core.models.extraction import ExtractedRelationship, KnowledgeGraph, OntologyAlignment
from core.models.facts import FACT_GROUP, FACT_SIDE
from core.models.graph import (
    Edge,
    FactClaim,
    Node,
    Support,
    edge_type_id,
    entity_id,
    entity_type_id,
    normalise_name,
    summary_id,
)
from core.models.vocabulary import (
    CHUNK,
    EDGE_TYPE,
    ENTITY,
    ENTITY_COLLECTION,
    ENTITY_TYPE,
    INDEX_FIELDS,
    IS_A,
    MENTIONS,
    NODE_SET,
    PART_OF,
    SUBCLASS_OF,
    SUMMARIZES,
    TEXT_SUMMARY,
    collection,
    relation_label,
)
from pipelines.built_graph import BuiltGraph, EmbedItem
from pipelines.models import Chunk, ExtractedEvent
from pipelines.temporal_builder import add_events


def build_graph(
    dataset: str,
    chunks: list[Chunk],
    graphs: list[KnowledgeGraph],
    node_sets: dict[str, str] | None = None,
    events: list[list[ExtractedEvent]] | None = None,
    *,
    relation_names: bool = True,
) -> BuiltGraph:
    """Nodes, edges and embedding work for a batch of extracted chunks.

    `node_sets` maps a document id to its node set: its chunks carry it as a property and in
    their vector payload, so a search can keep to one set (CODING_RULES). Without
    `relation_names` no EdgeType node (a relationship name, there to be embedded) is built.
    """
    built = BuiltGraph()
    node_sets = node_sets or {}
    for chunk, graph in zip(chunks, graphs, strict=True):
        _add_chunk(built, dataset, chunk, graph, relation_names)
        if node_set := node_sets.get(chunk.document_id):
            built.nodes[chunk.id].properties[NODE_SET] = node_set
    if events:  # per chunk, from the temporal pipeline (pipelines/temporal_builder.py)
        add_events(built, dataset, chunks, graphs, events)
    for node in built.nodes.values():
        fields = INDEX_FIELDS.get(node.type) or built.custom_fields.get(node.type, ())
        if node.type in built.custom_fields and node.type not in INDEX_FIELDS:
            # The graph retrievers find entry points in Entity_name, custom classes included.
            built.embed(ENTITY_COLLECTION, EmbedItem(node.id, node.name, {"type": node.type}))
        for field_name in fields:
            text = node.name if field_name == "name" else _text(node.properties.get(field_name))
            if text.strip():
                payload = {"type": node.type}
                if node.type == EDGE_TYPE:  # graph search weighs edges by their name's score
                    payload["name"] = node.name
                if NODE_SET in node.properties:
                    payload[NODE_SET] = node.properties[NODE_SET]
                built.embed(collection(node.type, field_name), EmbedItem(node.id, text, payload))
    return built


def _add_chunk(
    built: BuiltGraph, dataset: str, chunk: Chunk, graph: KnowledgeGraph, relation_names: bool
) -> None:
    support = [Support(document_id=chunk.document_id, chunk_id=chunk.id)]
    built.add_node(
        Node(
            id=chunk.id,
            type=CHUNK,
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
                type=TEXT_SUMMARY,
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
                type=entity.type if entity.type in graph.node_classes else ENTITY,
                dataset=dataset,
                name=entity.name.strip(),
                support=support,
                properties={"description": entity.description, **entity.properties},
            )
        )
        built.add_node(
            Node(id=tid, type=ENTITY_TYPE, dataset=dataset, name=type_name, support=support)
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
                properties={"description": rel.description, **_fact_properties(rel)},
                claims=[
                    FactClaim(
                        document_id=chunk.document_id,
                        chunk_id=chunk.id,
                        start=rel.start,
                        end=rel.end,
                        from_document=rel.dated_by_document,
                    )
                ],
            )
        )
        if not relation_names:
            continue
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
                type=ENTITY_TYPE,
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


def _fact_properties(rel: ExtractedRelationship) -> dict[str, str]:
    """A functional relationship's group and subject side (pipelines/date_facts.py)."""
    return {FACT_GROUP: rel.group, FACT_SIDE: rel.side} if rel.group else {}


def _text(value: object) -> str:
    """The text embedded for a property: list items joined, nothing for None."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)
