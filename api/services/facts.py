"""facts: an entity's facts over time with their sources (`cogmill facts`, GET
/api/v1/datasets/{name}/facts, the client's `facts`), seen as of a world time and as known at
a system time."""

from __future__ import annotations

from api.services import shown
from api.services.datasets import existing
from core.access import LOCAL, Caller
from retrieval.fact_timeline import FactTimeline, timeline
from retrieval.fact_view import FactView
from runtime import Runtime


def facts(
    rt: Runtime,
    dataset: str,
    entity: str,
    *,
    relation: str | None = None,
    as_of: str | None = None,
    known_at: str | None = None,
    limit: int = 100,
    caller: Caller = LOCAL,
) -> FactTimeline:
    """The entity's timeline. Raises CatalogError for a bad dataset name, DatasetNotFoundError
    for an unknown one, InvalidInput for a bad bound or time, EntityNotFoundError when the
    dataset has no such entity."""
    stored = existing(rt, dataset, caller)
    view = FactView.parse(as_of, known_at)
    found = timeline(rt.graph, stored, entity, relation=relation, view=view, limit=limit)
    return found.model_copy(update={"dataset": shown.name(caller, found.dataset)})
