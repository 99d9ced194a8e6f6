"""What an extractor (LLM or offline) returns for one chunk of text."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ExtractedEntity(BaseModel):
    """An entity named in the text."""

    name: str = Field(min_length=1)
    type: str = "Thing"
    description: str = ""


class ExtractedRelationship(BaseModel):
    """A directed relationship between two extracted entities, by name."""

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""


class KnowledgeGraph(BaseModel):
    """The default `graph_model`: entities, relationships and a summary of one chunk."""

    entities: list[ExtractedEntity] = Field(default_factory=list)
    relationships: list[ExtractedRelationship] = Field(default_factory=list)
    summary: str = ""
