"""The pipelines cogmill runs, checked when this module is imported."""

from __future__ import annotations

from core.errors import InvalidInput
from pipelines.add_data_points import AddDataPoints
from pipelines.base import Pipeline, Step
from pipelines.chunk import ChunkDocuments
from pipelines.classify import Classify
from pipelines.extract_events import ExtractEvents
from pipelines.extract_graph import ExtractGraph
from pipelines.fact_judge import JudgeFacts
from pipelines.reconcile_entities import ReconcileEntities
from pipelines.resolve_entities import ResolveEntities
from pipelines.structured.link_rows import LinkRows
from pipelines.structured.read_tables import ReadTables
from pipelines.summarize_documents import SummarizeDocuments

# Bump a version whenever a step's behaviour, prompt or model changes: documents processed by
# an older version are then picked up again by a plain `cognify`.
# Version 2: document summaries and entity resolution (aliases, near-duplicate merges).
# Version 3: facts over time (claims and functional groups on relationships, judge_facts).
DEFAULT = Pipeline(
    "default",
    "3",
    [
        Classify,
        ChunkDocuments,
        ExtractGraph,
        SummarizeDocuments,
        ResolveEntities,
        AddDataPoints,
        ReconcileEntities,
        JudgeFacts,
    ],
)
# A superset of `default` (AddDataPoints replaces all a document's derived data, entities too),
# with events extracted from the resolved entities; a new default version re-runs it too.
TEMPORAL = Pipeline(
    "temporal",
    f"{DEFAULT.version}+events1",
    [
        *DEFAULT.steps[: DEFAULT.steps.index(AddDataPoints)],
        ExtractEvents,
        *DEFAULT.steps[DEFAULT.steps.index(AddDataPoints) :],
    ],
)
# Record files and databases: rows and foreign keys, no LLM (pipelines/structured/).
# Version 2: a row's name cells become entities the row MENTIONS (structured/row_entities.py).
STRUCTURED = Pipeline("structured", "2", [ReadTables, LinkRows])

PIPELINES: dict[str, Pipeline] = {DEFAULT.name: DEFAULT, TEMPORAL.name: TEMPORAL}
PIPELINES[STRUCTURED.name] = STRUCTURED


def _step_registry(pipelines: dict[str, Pipeline]) -> dict[str, type[Step]]:
    """Every step of every pipeline by name (one class per name), in pipeline order."""
    steps: dict[str, type[Step]] = {}
    for pipeline in pipelines.values():
        for step in pipeline.steps:
            if steps.setdefault(step.name, step) is not step:
                raise TypeError(
                    f"two steps are named {step.name!r}: {steps[step.name].__name__} and "
                    f"{step.__name__}; a step's name names its Celery task, so it must be unique"
                )
    return steps


# What workers register one Celery task for each (`cogmill.<name>`, on the step's queue).
STEPS = _step_registry(PIPELINES)


class UnknownPipeline(InvalidInput):
    """No pipeline by that name."""

    code = "unknown_pipeline"


def get_pipeline(name: str) -> Pipeline:
    """The pipeline called `name`, or an UnknownPipeline listing the known ones."""
    try:
        return PIPELINES[name]
    except KeyError:
        raise UnknownPipeline(
            f"unknown pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}"
        ) from None


def get_step(name: str) -> type[Step]:
    """The step class called `name`, or a ValueError listing the known ones."""
    try:
        return STEPS[name]
    except KeyError:
        raise ValueError(f"unknown step {name!r}; known: {', '.join(STEPS)}") from None
