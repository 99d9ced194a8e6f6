"""A document's lifecycle, as its Document node records it (the catalog, core/catalog.py).

`add` stores a document ADDED, with the pipeline it is assigned to when a record file or an
explicit choice says; a job marks it PROCESSED by a pipeline at a version, or FAILED with the
error; a changed node set sets it back to ADDED. Once a step has written anything derived from
it, DERIVED is set, so a later run purges before writing again. The values are stored data:
changing one makes existing catalogs unreadable.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class DocumentStatus(StrEnum):
    ADDED = "added"
    PROCESSED = "processed"
    FAILED = "failed"


# Pipeline names the catalog and the planner know without reading the pipeline definitions.
DEFAULT_PIPELINE = "default"
STRUCTURED_PIPELINE = "structured"

# Document node properties.
STATUS = "status"
PIPELINE = "pipeline"  # the pipeline the document is assigned to (`add`, `cognify --pipeline`)
PROCESSED_PIPELINE = "processed_pipeline"  # the pipeline that last processed it...
PIPELINE_VERSION = "pipeline_version"  # ...and that pipeline's version
DERIVED = "derived"  # something derived from it may be stored
ERROR = "error"
DOCUMENT_DATE = "document_date"  # the ISO day it speaks of (`add --document-date`)


def processed_properties(pipeline: str, version: str) -> dict[str, Any]:
    """The properties that mark a document processed by a pipeline version."""
    return {
        STATUS: DocumentStatus.PROCESSED.value,
        PROCESSED_PIPELINE: pipeline,
        PIPELINE_VERSION: version,
        ERROR: "",
    }


def failed_properties(error: str) -> dict[str, Any]:
    """The properties that mark a document failed, with the error."""
    return {STATUS: DocumentStatus.FAILED.value, ERROR: error}


def processed_by(properties: dict[str, Any], pipeline: str, version: str) -> bool:
    """Whether a document's properties say it was processed by exactly this pipeline version."""
    return (
        properties.get(STATUS) == DocumentStatus.PROCESSED
        and properties.get(PROCESSED_PIPELINE, DEFAULT_PIPELINE) == pipeline
        and properties.get(PIPELINE_VERSION) == version
    )
