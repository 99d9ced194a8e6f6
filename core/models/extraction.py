"""What an extractor (LLM or offline) returns for one chunk of text."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema


class ExtractedEntity(BaseModel):
    """An entity named in the text."""

    name: str = Field(min_length=1)
    type: str = "Thing"
    description: str = ""
    # Set by cogmill, never asked of the LLM (hidden from the schema): a custom graph model's
    # declared field values (core/models/custom.py) and an ontology match's `ontology_uri`.
    properties: SkipJsonSchema[dict[str, Any]] = Field(default_factory=dict)


class ExtractedRelationship(BaseModel):
    """A directed relationship between two extracted entities, by name."""

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""
    # Set by cogmill, never asked of the LLM (hidden from the schema; pipelines/date_facts.py):
    # when the passage says the fact held (days since 1970-01-01), and its functional group
    # and subject side (core/models/facts.py) when it holds one value at a time.
    start: SkipJsonSchema[int | None] = None
    end: SkipJsonSchema[int | None] = None
    dated_by_document: SkipJsonSchema[bool] = False  # the time is the document's date
    group: SkipJsonSchema[str] = ""
    side: SkipJsonSchema[str] = ""


class KnowledgeGraph(BaseModel):
    """The default `graph_model`: entities, relationships and a summary of one chunk."""

    entities: list[ExtractedEntity] = Field(default_factory=list)
    relationships: list[ExtractedRelationship] = Field(default_factory=list)
    summary: str = ""
    # Custom graph model classes in this graph -> their embedded fields (core/models/custom.py).
    node_classes: SkipJsonSchema[dict[str, list[str]]] = Field(default_factory=dict)
    ontology: SkipJsonSchema[OntologyAlignment | None] = None


class OntologyClassRef(BaseModel):
    """An ontology class written to the graph as an EntityType node (core/ontology.py)."""

    uri: str
    label: str
    parents: list[str] = Field(default_factory=list)  # uris of direct superclasses


class OntologyAlignment(BaseModel):
    """What ontology alignment matched in one chunk's graph (pipelines/align_ontology.py)."""

    type_uris: dict[str, str] = Field(default_factory=dict)  # entity type -> class uri
    # Entity name -> classes of the individual it matched (its rdf:type), as extra IS_A edges.
    entity_classes: dict[str, list[str]] = Field(default_factory=dict)
    classes: list[OntologyClassRef] = Field(default_factory=list)  # matches + superclasses


KnowledgeGraph.model_rebuild()
