"""The pipelines cogmill runs, checked when this module is imported."""

from __future__ import annotations

from pipelines.add_data_points import AddDataPoints
from pipelines.base import Pipeline
from pipelines.chunk import ChunkDocuments
from pipelines.classify import Classify
from pipelines.extract_graph import ExtractGraph

# Bump a version whenever a step's behaviour, prompt or model changes: documents processed by
# an older version are then picked up again by a plain `cognify`.
DEFAULT = Pipeline("default", "1", [Classify, ChunkDocuments, ExtractGraph, AddDataPoints])

PIPELINES: dict[str, Pipeline] = {DEFAULT.name: DEFAULT}


def get_pipeline(name: str) -> Pipeline:
    """The pipeline called `name`, or a ValueError listing the known ones."""
    try:
        return PIPELINES[name]
    except KeyError:
        raise ValueError(
            f"unknown pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}"
        ) from None
