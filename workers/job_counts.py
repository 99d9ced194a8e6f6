"""A job's final counts as the graph holds them, not as its batches reported them.

Batches report what they wrote: an entity two batches mention is reported by both, and one
that entity resolution merges into another afterwards is reported though it is gone. So when
a job ends, its dataset's entities and relationships are counted in the graph and compared
with the counts taken when the job was planned: `entities` and `relationships` are what the
dataset gained, `entities_merged` and `relationships_merged` what the batches wrote that landed
on one already there (stored by an earlier job or another batch of this one, or merged into
another entity). A job on a dataset nothing else writes meanwhile therefore reports exactly
the change of the graph; on a new dataset, the graph itself. `chunks` stays what the batches
wrote (every chunk has its own id; a purged and rewritten one counts as written).
"""

from __future__ import annotations

from collections.abc import Mapping

from core.models.vocabulary import (
    ALIAS,
    CHUNK,
    DATASET,
    DOCUMENT,
    EDGE_TYPE,
    ENTITY_TYPE,
    EVENT,
    INTERVAL,
    NODE_SET_LABEL,
    STRUCTURAL_EDGES,
    TABLE,
    TABLE_ROW,
    TEXT_SUMMARY,
    TIMESTAMP,
)
from core.ports import GraphReader

# Node types of the graph's own making; every other type is an entity (Entity, or a class
# of a custom graph model), as pipelines/add_data_points.py counts them.
BUILT_IN_TYPES = frozenset(
    {
        DATASET,
        DOCUMENT,
        CHUNK,
        ENTITY_TYPE,
        TEXT_SUMMARY,
        EDGE_TYPE,
        ALIAS,
        EVENT,
        TIMESTAMP,
        INTERVAL,
        TABLE,
        TABLE_ROW,
        NODE_SET_LABEL,
    }
)
SETTLED = ("entities", "relationships")
EDGE_PREFIX = "edges:"


def stored(graph: GraphReader, dataset: str) -> dict[str, int]:
    """The dataset's entities and relationships (edges between entities) in the graph."""
    counts = graph.count(dataset, edge_names=True)
    entities = sum(
        n
        for key, n in counts.items()
        if key != "edges" and not key.startswith(EDGE_PREFIX) and key not in BUILT_IN_TYPES
    )
    relationships = sum(
        n
        for key, n in counts.items()
        if key.startswith(EDGE_PREFIX) and key.removeprefix(EDGE_PREFIX) not in STRUCTURAL_EDGES
    )
    return {"entities": entities, "relationships": relationships}


def settle(
    written: Mapping[str, int], before: Mapping[str, int], after: Mapping[str, int]
) -> dict[str, int]:
    """The job's counts from what its batches wrote and the graph before and after it."""
    counts = dict(written)
    for name in SETTLED:
        gained = max(after.get(name, 0) - before.get(name, 0), 0)
        counts[name] = gained
        counts[f"{name}_merged"] = max(written.get(name, 0) - gained, 0)
    return counts
