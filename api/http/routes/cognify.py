"""Start a cognify job on a dataset (202 + the job's URL)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.http.deps import WRITE, KnownDataset, RuntimeDep
from api.http.schemas import CognifyRequest, JobAccepted, error_responses
from api.services.cognify import OntologyFile, cognify

router = APIRouter(prefix="/api/v1/datasets", tags=["cognify"])


@router.post(
    "/{name}/cognify",
    dependencies=[WRITE],
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
    ontology = None
    if body.ontology is not None:
        ontology = OntologyFile(body.ontology.encode(), f"ontology.{body.ontology_format}")
    job = cognify(runtime, name, pipeline=body.pipeline, everything=body.all,
                  graph_model=body.graph_model, ontology=ontology)  # fmt: skip
    response.headers["Location"] = request.app.url_path_for("get_job", job_id=job.id)
    return JobAccepted(job_id=job.id, status=job.status, message=job.message)
