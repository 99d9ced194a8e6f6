"""Sync a dataset with its source (202 + the job's URL), and the caller's schedules."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from api.http.deps import DatasetName, Reader, RuntimeDep, Writer
from api.http.schemas import JobAccepted, error_responses
from api.http.sync_schemas import ScheduleCreate, SyncRequest
from api.services import schedules
from api.services import sync as service
from api.services.schedules import SchedulePublic
from api.services.webhooks import for_job as job_webhook

router = APIRouter(prefix="/api/v1", tags=["sync"])
ScheduleId = Annotated[str, Path(description="Schedule id (sch_...)", max_length=64)]


@router.post(
    "/datasets/{name}/sync",
    status_code=202,
    response_model=JobAccepted,
    responses=error_responses(400, 409, 422, 503),
)
def sync_dataset(
    name: DatasetName,
    body: SyncRequest,
    caller: Writer,
    runtime: RuntimeDep,
    request: Request,
    response: Response,
) -> JobAccepted:
    """Make the dataset (created if new) mirror a source and cognify what changed.

    One job reads the source (status queued), adds, replaces, renames and removes documents,
    then cognifies them; poll it at the Location header. A source on the server's disk must
    be inside COGMILL_SYNC_ROOTS (403 otherwise); 409 while another job runs on the dataset.
    """
    spec = body.spec()
    hook = job_webhook(runtime, body.webhook, caller) if body.webhook else None
    job = service.sync(
        runtime,
        name,
        spec,
        caller,
        remote=True,
        webhook=hook.id if hook else None,
        budget_usd=body.budget_usd,
        budget_tokens=body.budget_tokens,
    )
    response.headers["Location"] = request.app.url_path_for("get_job", job_id=job.id)
    return JobAccepted(
        job_id=job.id,
        status=job.status,
        message=job.message,
        webhook_id=hook.id if hook else None,
        webhook_secret=hook.secret if hook else None,
    )


@router.get("/schedules", response_model=list[SchedulePublic], responses=error_responses(503))
def list_schedules(runtime: RuntimeDep, caller: Reader) -> list[SchedulePublic]:
    """The caller's schedules: next run, last run, runs fired / started / skipped / missed."""
    return schedules.list_schedules(runtime, caller)


@router.post(
    "/schedules",
    status_code=201,
    response_model=SchedulePublic,
    responses=error_responses(400, 404, 422, 503),
)
def add_schedule(body: ScheduleCreate, runtime: RuntimeDep, caller: Writer) -> SchedulePublic:
    """Sync a dataset with `sync` (or cognify it) every `every` or on `cron` (UTC).

    422 for an interval below COGMILL_SCHEDULE_MIN_SECONDS or one schedule more than
    COGMILL_SCHEDULES_PER_TENANT; a run whose previous run is still going is skipped."""
    if body.sync is not None and body.cognify:
        raise schedules.ScheduleError("give `sync` or `cognify`, not both")
    if body.sync is None and not body.cognify:
        raise schedules.ScheduleError("give `sync` (a source) or `cognify: true`")
    return schedules.add(
        runtime,
        body.dataset,
        source=body.sync.spec() if body.sync is not None else None,
        every=body.every,
        cron=body.cron,
        everything=body.all,
        caller=caller,
        remote=True,
        budget_usd=body.budget_usd,
        budget_tokens=body.budget_tokens,
    )


@router.post(
    "/schedules/{schedule_id}/pause",
    response_model=SchedulePublic,
    responses=error_responses(404, 503),
)
def pause_schedule(schedule_id: ScheduleId, runtime: RuntimeDep, caller: Writer) -> SchedulePublic:
    """Stop firing a schedule until it is resumed."""
    return schedules.set_paused(runtime, schedule_id, True, caller)


@router.post(
    "/schedules/{schedule_id}/resume",
    response_model=SchedulePublic,
    responses=error_responses(404, 503),
)
def resume_schedule(schedule_id: ScheduleId, runtime: RuntimeDep, caller: Writer) -> SchedulePublic:
    """Fire a paused schedule again, from its next run time on."""
    return schedules.set_paused(runtime, schedule_id, False, caller)


@router.delete(
    "/schedules/{schedule_id}", response_model=SchedulePublic, responses=error_responses(404, 503)
)
def remove_schedule(schedule_id: ScheduleId, runtime: RuntimeDep, caller: Writer) -> SchedulePublic:
    """Remove a schedule (a run already started goes on)."""
    return schedules.remove(runtime, schedule_id, caller)
