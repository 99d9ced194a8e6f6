"""Records exchanged with vector stores."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
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
    """Vector collections are named `<Type>_<field>` (docs/architecture.md)."""
    return f"{node_type}_{field}"


_COLLECTION_NAME = re.compile(r"[A-Za-z0-9_]{1,128}")


def check_collection(name: str) -> None:
    """Raise ValueError unless the name is safe as a folder, label and index name."""
    if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
        raise ValueError(
            f"bad vector collection name {name!r}: use 1-128 letters, digits or underscores"
        )


def point_id(value: str) -> str:
    """The canonical UUID string of a point id; every vector store accepts only UUIDs."""
    try:
        return str(uuid.UUID(value))
    except (TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"vector point id {value!r} is not a UUID string") from err


def check_dim(vector: Sequence[float], dim: int, what: str) -> None:
    """Raise ValueError when a vector does not have the store's dimension."""
    if len(vector) != dim:
        raise ValueError(f"{what} has {len(vector)} dimensions; this store holds {dim}")
