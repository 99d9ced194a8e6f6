"""What `facts` answers (GET /api/v1/datasets/{name}/facts): an entity's facts over time.

Re-exported by cogmill_client.models, whose models tests/unit/test_client_schema.py checks
against the server's OpenAPI document.
"""

from __future__ import annotations

from pydantic import Field

from cogmill_client.api_model import ApiModel


class FactSource(ApiModel):
    """One passage that stated a fact, and the time it gave."""

    document_id: str
    document_name: str
    chunk_id: str
    said_from: str | None = None
    said_until: str | None = None
    recorded_at: str | None = None


class Fact(ApiModel):
    """One relationship of the entity: when it held (world time), when cogmill learnt it and
    that it ended (system time), what superseded it, its sources."""

    source: str
    relation: str
    target: str
    group: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    spans: list[list[str | None]] = Field(default_factory=list)
    holds: bool = True
    superseded_by: str | None = None
    recorded_at: str | None = None
    retired_at: str | None = None
    sources: list[FactSource] = Field(default_factory=list)


class FactTimeline(ApiModel):
    """An entity's facts in time order."""

    entity: str
    dataset: str
    facts: list[Fact] = Field(default_factory=list)
    truncated: bool = False
