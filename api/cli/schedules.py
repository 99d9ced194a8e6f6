"""`cogmill schedules`: add, list, pause, resume and remove the schedules the beat fires."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.ingest import ForeignKeyOption, KeysOption, PrimaryKeyOption
from api.cli.jobs import BUDGET_TOKENS_HELP, BUDGET_USD_HELP
from api.cli.render import err, guarded, out, runtime_session
from api.cli.sync import (
    ExcludeOption,
    IncludeOption,
    KindOption,
    RefOption,
    TableOption,
    UpdatedOption,
    source_spec,
)

if TYPE_CHECKING:
    from api.services.schedules import SchedulePublic

app = typer.Typer(
    no_args_is_help=True,
    help="Sync or re-cognify datasets on a schedule, fired by `cogmill beat` (or `serve`).",
)


@app.command("add")
def add(
    dataset: Annotated[str, typer.Argument(help="Dataset the schedule runs on")],
    sync_source: Annotated[
        str | None,
        typer.Option("--sync", help="Sync this source (folder, git repository, SQL URL)"),
    ] = None,
    cognify: Annotated[
        bool, typer.Option("--cognify", help="Cognify new and changed documents instead")
    ] = False,
    all_documents: Annotated[
        bool, typer.Option("--all", help="With --cognify: every document (a pipeline bump)")
    ] = False,
    every: Annotated[
        str | None, typer.Option("--every", help="Interval: 15m, 1h, 1d (at least the minimum)")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help="Cron expression (UTC), e.g. '0 3 * * 1-5'")
    ] = None,
    kind: KindOption = None,
    ref: RefOption = None,
    include: IncludeOption = None,
    exclude: ExcludeOption = None,
    table: TableOption = None,
    updated_column: UpdatedOption = None,
    keys: KeysOption = None,
    primary_key: PrimaryKeyOption = None,
    foreign_key: ForeignKeyOption = None,
    budget_usd: Annotated[float | None, typer.Option(help=BUDGET_USD_HELP)] = None,
    budget_tokens: Annotated[int | None, typer.Option(help=BUDGET_TOKENS_HELP)] = None,
) -> None:
    """Add a schedule: `--sync SOURCE` or `--cognify`, `--every` or `--cron`.

    A run whose previous run is still going is skipped (and counted), never stacked."""
    from api.services import schedules
    from workers.schedules import ScheduleError

    def body() -> SchedulePublic:
        if (sync_source is None) == (not cognify):
            raise ScheduleError("give --sync SOURCE or --cognify")
        spec = None
        if sync_source is not None:
            spec = source_spec(
                sync_source,
                kind,
                ref,
                include,
                exclude,
                table,
                updated_column,
                keys,
                primary_key,
                foreign_key,
            )
        with runtime_session() as rt:
            return schedules.add(
                rt,
                dataset,
                source=spec,
                every=every,
                cron=cron,
                everything=all_documents,
                budget_usd=budget_usd,
                budget_tokens=budget_tokens,
            )

    shown = guarded(body)
    out.print(f"schedule {shown.id}: {_line(shown)}", markup=False)


def _line(s: SchedulePublic) -> str:
    what = f"sync {s.source}" if s.action == "sync" else "cognify" + (" --all" if s.all else "")
    when = f"every {s.every_seconds:g}s" if s.every_seconds is not None else f"cron '{s.cron}'"
    state = "paused" if s.paused else f"next {s.next_run:%Y-%m-%d %H:%M:%S} UTC"
    return f"{s.dataset}: {what}, {when}, {state}"


@app.command("list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="JSON (for scripts)")] = False,
) -> None:
    """The schedules, their next run, last run and counts of runs."""
    from api.services import schedules

    def body() -> tuple[list[SchedulePublic], bool]:
        with runtime_session() as rt:
            return schedules.list_schedules(rt), schedules.beat_running(rt)

    found, running = guarded(body)
    if as_json:
        out.print_json(data=[s.model_dump(mode="json") for s in found])
        return
    for s in found:
        out.print(f"{s.id}  {_line(s)}", markup=False)
        runs = ", ".join(f"{count} {name}" for name, count in s.runs.items())
        last = s.last_run
        if last is not None:
            job = f" job {last.job_id}" if last.job_id else ""
            note = f": {last.note}" if last.note else ""
            due = f"{last.due_at:%Y-%m-%d %H:%M:%S}"
            out.print(f"    last {due} {last.outcome}{job}{note}", markup=False)
        out.print(f"    runs: {runs}", markup=False)
    if found and not running:
        hint = "run `cogmill beat` (distributed) or `cogmill serve` (embedded)"
        err.print(f"note: no beat fired schedules lately; {hint}", markup=False)


def _change(schedule_id: str, verb: str) -> None:
    from api.services import schedules

    def body() -> SchedulePublic:
        with runtime_session() as rt:
            if verb == "removed":
                return schedules.remove(rt, schedule_id)
            return schedules.set_paused(rt, schedule_id, verb == "paused")

    shown = guarded(body)
    out.print(f"schedule {shown.id} {verb}: {_line(shown)}", markup=False)


@app.command("pause")
def pause(schedule_id: Annotated[str, typer.Argument(help="Schedule id (sch_...)")]) -> None:
    """Stop firing a schedule until it is resumed."""
    _change(schedule_id, "paused")


@app.command("resume")
def resume(schedule_id: Annotated[str, typer.Argument(help="Schedule id (sch_...)")]) -> None:
    """Fire a paused schedule again, from its next run time on."""
    _change(schedule_id, "resumed")


@app.command("remove")
def remove(schedule_id: Annotated[str, typer.Argument(help="Schedule id (sch_...)")]) -> None:
    """Remove a schedule (a run already started goes on)."""
    _change(schedule_id, "removed")
