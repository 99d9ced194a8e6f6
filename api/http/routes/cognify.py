"""Start a cognify job on a dataset (202 + the job's URL)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api.http.deps import KnownDataset, RuntimeDep
from api.http.schemas import CognifyRequest, JobAccepted, error_responses
from core.models.custom import graph_model_of
from core.ontology import store_ontology
from workers.orchestration import cognify

router = APIRouter(prefix="/api/v1/datasets", tags=["cognify"])


@router.post(
    "/{name}/cognify",
    status_code=202,
    response_model=JobAccepted,
    responses=error_responses(400, 404, 422, 503),
)
def start_cognify(
    name: KnownDataset,
    runtime: RuntimeDep,
    request: Request,
    response: Response,
    body: CognifyRequest | None = None,
) -> JobAccepted:
    """Build the graph and vectors of new and changed documents (all with `"all": true`).

    Poll the job at the Location header; a job with nothing to do is already succeeded.
    """
    body = body or CognifyRequest()
    options: dict[str, Any] = {}
    if body.graph_model is not None:  # invalid models and ontologies are 422s (ValueError)
        graph_model_of(body.graph_model)
        options["graph_model"] = body.graph_model
    if body.ontology is not None:
        data, filename = body.ontology.encode(), f"ontology.{body.ontology_format}"
        options["ontology"] = store_ontology(runtime.blobs, data, filename)
    job = cognify(runtime, name, body.pipeline, "all" if body.all else "changed", options)
    response.headers["Location"] = request.app.url_path_for("get_job", job_id=job.id)
    return JobAccepted(job_id=job.id, status=job.status, message=job.message)
