"""The graph's vocabulary: node labels, edge names, embedded fields and vector collections.

Writers (pipelines/) and readers (retrieval/, the stores, the API) share these names through
this module, so neither imports the other to learn what the graph calls things. The values
are stored data: changing one makes existing graphs and vector collections unreadable.
"""

from __future__ import annotations

# Node labels (docs/architecture.md, "Data model").
DATASET = "Dataset"
DOCUMENT = "Document"
CHUNK = "DocumentChunk"
ENTITY = "Entity"
ENTITY_TYPE = "EntityType"
TEXT_SUMMARY = "TextSummary"
# A relationship name of a dataset: a node without edges whose vector (EdgeType_relationship_name)
# scores relations by name in graph search; its support is the chunks whose edges use the name.
EDGE_TYPE = "EdgeType"
# A name that resolved to an entity (pipelines/resolve_entities.py): Alias -ALIAS_OF-> Entity.
ALIAS = "Alias"
EVENT, TIMESTAMP, INTERVAL = "Event", "Timestamp", "Interval"
TABLE, TABLE_ROW = "Table", "TableRow"
NODE_SET_LABEL = "NodeSet"

# Structural edges: chunk PART_OF document, chunk MENTIONS entity, entity IS_A entity type,
# summary SUMMARIZES chunk, entity type SUBCLASS_OF entity type (ontology classes), alias
# ALIAS_OF entity. Every other edge name is a relationship between entities.
PART_OF, MENTIONS, IS_A, SUMMARIZES = "PART_OF", "MENTIONS", "IS_A", "SUMMARIZES"
SUBCLASS_OF = "SUBCLASS_OF"
ALIAS_OF = "ALIAS_OF"
# Event edges: event AT timestamp, event DURING interval, event INVOLVES entity.
AT, DURING, INVOLVES = "AT", "DURING", "INVOLVES"
TEMPORAL_EDGES = frozenset({AT, DURING, INVOLVES})
# Tables: row IN_TABLE table is structural; row REFERENCES row (a foreign key) is a relation
# that graph search follows.
IN_TABLE, REFERENCES = "IN_TABLE", "REFERENCES"
# Event edges (AT, DURING, INVOLVES) are structural too: they are not entity relationships.
STRUCTURAL_EDGES = (
    frozenset({PART_OF, MENTIONS, IS_A, SUMMARIZES, SUBCLASS_OF, ALIAS_OF, IN_TABLE})
    | TEMPORAL_EDGES
)

# Property of the documents added to a node set and of their chunks (and the chunks' vector
# payload key).
NODE_SET = "node_set"

# Node type -> its fields embedded into the `<Type>_<field>` collections.
INDEX_FIELDS: dict[str, tuple[str, ...]] = {
    CHUNK: ("text",),
    ENTITY: ("name",),
    TEXT_SUMMARY: ("text",),
    EDGE_TYPE: ("relationship_name",),
    EVENT: ("text",),
    TABLE_ROW: ("text",),
    TABLE: ("name",),
}


def collection(node_type: str, field: str) -> str:
    """The vector collection holding a node type's embedded field."""
    return f"{node_type}_{field}"


CHUNK_COLLECTION = collection(CHUNK, "text")
ENTITY_COLLECTION = collection(ENTITY, "name")
SUMMARY_COLLECTION = collection(TEXT_SUMMARY, "text")
EDGE_TYPE_COLLECTION = collection(EDGE_TYPE, "relationship_name")
EVENT_COLLECTION = collection(EVENT, "text")
# Rows of record files and databases (the `structured` pipeline) are passages too: each is
# stored with its text, document id and name, like a chunk.
ROW_COLLECTION = collection(TABLE_ROW, "text")
TABLE_COLLECTION = collection(TABLE, "name")


def relation_label(name: str) -> str:
    """Readable form of a relationship name, for embedding and display."""
    return name.replace("_", " ").strip()
