"""`cogmill jobs`: list, show, cancel, resume and watch cognify jobs."""

from __future__ import annotations

import json
import sys
from datetime import UTC
from typing import Annotated

import typer

from api.cli.render import guarded, out, runtime_session, wait_for
from api.services import jobs
from core.models.jobs import Job
from workers.usage import describe

app = typer.Typer(no_args_is_help=True, help="List, inspect, cancel and resume cognify jobs.")
BUDGET_USD_HELP = (
    "Pause the job (status paused_budget) before its LLM calls would cost more than this "
    "many USD at the configured prices; `cogmill jobs resume ID` continues it"
)
BUDGET_TOKENS_HELP = "The same cap in LLM tokens (prompt + completion)"


JobId = Annotated[str, typer.Argument(help="A job id, or a unique start of one")]
LIST_COLUMNS = "{:<32}  {:<13}  {:<20}  {:>9}  {}"


@app.command("list")
def jobs_list(
    as_json: Annotated[
        bool, typer.Option("--json", help="A JSON array of the jobs, as `jobs show` prints each")
    ] = False,
) -> None:
    """Jobs known to the state store, newest first."""

    def body() -> list[Job]:
        with runtime_session() as rt:
            return jobs.list_jobs(rt)

    found = guarded(body)
    if as_json:
        out.print_json(json.dumps([json.loads(job.model_dump_json()) for job in found]))
        return
    out.print(LIST_COLUMNS.format("JOB ID", "STATUS", "DATASET", "DOCUMENTS", "CREATED (UTC)"))
    for job in found:
        done = f"{job.counts.get('documents', 0)}/{job.total_documents}"
        created = job.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        out.print(
            LIST_COLUMNS.format(job.id, job.status.value, job.dataset, done, created), markup=False
        )


@app.command("show")
def jobs_show(
    job_id: JobId,
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON (the only output; for scripts)")
    ] = True,
) -> None:
    """One job as JSON: status, counts, per-document errors, LLM/embeddings tokens and cost,
    its budget and what the budget counts as spent."""

    def body() -> Job:
        with runtime_session() as rt:
            return jobs.show(rt, jobs.by_prefix(rt, job_id))

    out.print_json(guarded(body).model_dump_json())


@app.command("cancel")
def jobs_cancel(job_id: JobId) -> None:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary."""

    def body() -> Job:
        with runtime_session() as rt:
            return jobs.cancel(rt, jobs.by_prefix(rt, job_id))

    job = guarded(body)
    out.print(
        f"job {job.id}: cancel requested"
        if not job.status.finished
        else f"job {job.id} already {job.status.value}"
    )


@app.command("resume")
def jobs_resume(
    job_id: JobId,
    budget_usd: Annotated[float | None, typer.Option(help=BUDGET_USD_HELP)] = None,
    budget_tokens: Annotated[int | None, typer.Option(help=BUDGET_TOKENS_HELP)] = None,
) -> None:
    """Continue a job paused by its budget from where it stopped, under a new budget that
    counts what it spent already (none given: no cap); waits for it like cognify."""

    def body() -> jobs.JobReport:
        with runtime_session(with_worker=True) as rt:
            jobs.budget_of(rt.settings, budget_usd, budget_tokens)  # a bad budget before the id
            full_id = jobs.by_prefix(rt, job_id)
            job = jobs.resume(rt, full_id, usd=budget_usd, tokens=budget_tokens)
            return wait_for(job, sys.stderr.isatty())

    job = guarded(body)
    out.print(f"job {job.id}: {job.status.value}" + (f" ({job.message})" if job.message else ""))
    budget = job.budget
    cap = f" of {describe(budget)}" if budget is not None else ""
    out.print(
        f"documents {job.counts.get('documents', 0)}/{job.total_documents}, errors "
        f"{len(job.errors)}; spent ${job.spent.usd:.4f}, {job.spent.tokens} tokens{cap}",
        markup=False,
    )
    if job.status.value != "succeeded":
        raise typer.Exit(1)


@app.command("watch")
def jobs_watch(
    job_id: JobId,
    after: Annotated[int, typer.Option(min=0, help="Skip events up to this id")] = 0,
) -> None:
    """Follow a job's events until it ends; exit 0 when it succeeded, 1 otherwise."""

    def body() -> str:
        status = ""
        with runtime_session() as rt:
            for event in jobs.watch(rt, jobs.by_prefix(rt, job_id), after=after):
                if event is None:
                    continue
                fields = {k: v for k, v in event.data.items() if k not in ("event", "at")}
                detail = " ".join(f"{k}={v}" for k, v in fields.items() if v not in ("", None))
                label = f"#{event.seq}" if event.seq is not None else "  "
                out.print(f"{label} {event.kind} {detail}".rstrip(), markup=False)
                status = str(event.data.get("status", status))
        return status

    status = guarded(body)
    if status != "succeeded":
        raise typer.Exit(1)
