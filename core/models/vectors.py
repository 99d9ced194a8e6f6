"""Records exchanged with vector stores."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class VectorPoint(BaseModel):
    """One vector to upsert; `id` is the id of the node or edge it embeds."""

    id: str
    vector: list[float]
    dataset: str
    payload: dict[str, Any] = Field(default_factory=dict)


class VectorHit(BaseModel):
    """One search result: the id, its cosine similarity to the query, and its payload."""

    id: str
    score: float
    payload: dict[str, Any] = Field(default_factory=dict)


def collection_name(node_type: str, field: str) -> str:
    """Vector collections are named `<Type>_<field>` (DESIGN.md)."""
    return f"{node_type}_{field}"
