"""A job's final counts as the graph holds them, not as its batches reported them.

Batches report what they wrote: an entity two batches mention is reported by both, and one
that entity resolution merges into another afterwards is reported though it is gone. So when
a job ends, the entities and relationships its documents support are counted in the graph:
`entities` and `relationships` are what the job stored, and `entities_merged` and
`relationships_merged` what its batches wrote that landed on one written already (by another
batch, or merged into another entity by entity resolution). On a new dataset the job's counts
are therefore the graph's. `chunks` stays what the batches wrote (every chunk has its own id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def stored(graph: GraphReader, dataset: str, documents: Sequence[str]) -> dict[str, int]:
    """The entities and relationships (edges between entities) the documents support."""
    counts = graph.count(dataset, edge_names=True, documents=documents)
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


def settle(written: Mapping[str, int], kept: Mapping[str, int]) -> dict[str, int]:
    """The job's counts: what its batches wrote, with its entities and relationships as the
    graph keeps them (`stored`) and the rest of the batches' writes counted as merged."""
    counts = dict(written)
    for name in SETTLED:
        counts[name] = kept.get(name, 0)
        counts[f"{name}_merged"] = max(written.get(name, 0) - kept.get(name, 0), 0)
    return counts
