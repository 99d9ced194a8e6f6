"""Start a cognify job on a dataset (202 + the job's URL)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.http.deps import KnownDataset, RuntimeDep, Writer
from api.http.schemas import CognifyRequest, JobAccepted, error_responses
from api.services.cognify import OntologyFile, cognify
from api.services.estimate import CognifyEstimate
from api.services.estimate import estimate as run_estimate
from api.services.webhooks import for_job as job_webhook

router = APIRouter(prefix="/api/v1/datasets", tags=["cognify"])
ESTIMATE = "Only count the LLM calls, tokens and cost the job would take (runs nothing)"


@router.post(
    "/{name}/cognify",
    status_code=202,
    response_model=JobAccepted | CognifyEstimate,
    responses={
        200: {"model": CognifyEstimate, "description": "With `estimate`: nothing was run"},
        **error_responses(400, 404, 422, 503),
    },
)
def start_cognify(
    caller: Writer,
    name: KnownDataset,
    runtime: RuntimeDep,
    request: Request,
    response: Response,
    body: CognifyRequest | None = None,
    estimate: Annotated[bool, Query(description=ESTIMATE)] = False,
) -> JobAccepted | CognifyEstimate:
    """Build the graph and vectors of new and changed documents (all with `"all": true`).

    Poll the job at the Location header; a job with nothing to do is already succeeded.
    With `estimate` (query or body): 200 and the LLM calls, tokens and cost it would take.
    """
    body = body or CognifyRequest()
    if estimate or body.estimate:
        response.status_code = 200
        return run_estimate(
            runtime,
            name,
            everything=body.all,
            graph_model=body.graph_model,
            pipeline=body.pipeline,
            caller=caller,
        )
    ontology = None
    if body.ontology is not None:
        ontology = OntologyFile(body.ontology.encode(), f"ontology.{body.ontology_format}")
    hook = job_webhook(runtime, body.webhook, caller) if body.webhook else None
    job = cognify(
        runtime,
        name,
        pipeline=body.pipeline,
        everything=body.all,
        graph_model=body.graph_model,
        ontology=ontology,
        caller=caller,
        webhook=hook.id if hook else None,
        budget_usd=body.budget_usd,
        budget_tokens=body.budget_tokens,
        llm_mode=body.llm_mode,
    )
    response.headers["Location"] = request.app.url_path_for("get_job", job_id=job.id)
    return JobAccepted(
        job_id=job.id,
        status=job.status,
        message=job.message,
        webhook_id=hook.id if hook else None,
        webhook_secret=hook.secret if hook else None,
    )
