"""`cogmill sync` (a dataset follows a folder, a git repository or SQL tables) and `cogmill
beat` (the one process that fires schedules, distributed mode)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.ingest import ForeignKeyOption, KeysOption, PrimaryKeyOption, read_declarations
from api.cli.jobs import BUDGET_TOKENS_HELP, BUDGET_USD_HELP
from api.cli.render import fail, guarded, out, runtime_session, wait_for
from core.settings import Settings

if TYPE_CHECKING:
    from api.services.jobs import JobReport
    from pipelines.sources import SourceSpec

app = typer.Typer()

KindOption = Annotated[
    str | None,
    typer.Option("--kind", help="folder, git or sql (default: guessed from SOURCE)"),
]
RefOption = Annotated[str | None, typer.Option("--ref", help="Git branch or tag (default: HEAD)")]
IncludeOption = Annotated[
    list[str] | None,
    typer.Option("--include", help="Only files matching this glob, e.g. '*.md' (repeatable)"),
]
ExcludeOption = Annotated[
    list[str] | None,
    typer.Option("--exclude", help="Leave out files or folders matching this glob (repeatable)"),
]
TableOption = Annotated[
    list[str] | None, typer.Option("--table", "-t", help="SQL: only this table (repeatable)")
]
UpdatedOption = Annotated[
    list[str] | None,
    typer.Option(
        "--updated-column",
        help="SQL: COLUMN (every table having it) or TABLE=COLUMN that grows with every insert "
        "and update; changed rows are read from there (repeatable)",
    ),
]


def source_spec(
    source: str,
    kind: str | None,
    ref: str | None,
    include: list[str] | None,
    exclude: list[str] | None,
    table: list[str] | None,
    updated: list[str] | None,
    keys: Path | None,
    primary_key: list[str] | None,
    foreign_key: list[str] | None,
) -> SourceSpec:
    """The source the options describe. Raises SourceError, KeyDeclarationError."""
    from pipelines.sources.spec import parse_source, parse_updated

    fields: dict[str, Any] = {
        "ref": ref,
        "include": include or [],
        "exclude": exclude or [],
        "tables": table or [],
        "keys": read_declarations(keys, primary_key, foreign_key),
        "updated": parse_updated(updated or []),
    }
    return parse_source(source, kind, **fields)


@app.command()
def sync(
    source: Annotated[
        str, typer.Argument(help="A folder, a git repository (URL or path) or a SQLAlchemy URL")
    ],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset that follows it")],
    kind: KindOption = None,
    ref: RefOption = None,
    include: IncludeOption = None,
    exclude: ExcludeOption = None,
    table: TableOption = None,
    updated_column: UpdatedOption = None,
    keys: KeysOption = None,
    primary_key: PrimaryKeyOption = None,
    foreign_key: ForeignKeyOption = None,
    webhook: Annotated[
        str | None, typer.Option(help="POST the job record to this URL when it ends (signed)")
    ] = None,
    budget_usd: Annotated[float | None, typer.Option(help=BUDGET_USD_HELP)] = None,
    budget_tokens: Annotated[int | None, typer.Option(help=BUDGET_TOKENS_HELP)] = None,
) -> None:
    """Make a dataset mirror a source and cognify what changed.

    New files are added, changed ones replaced, renamed ones renamed, removed ones deleted
    with what only they supported. Run it again (or `cogmill schedules add`) to follow the
    source: only what changed since the last successful sync is read and cognified.
    """
    from api.services import sync as service
    from api.services.webhooks import for_job

    def body() -> tuple[JobReport, dict[str, Any] | None]:
        spec = source_spec(
            source,
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
        with runtime_session(with_worker=True) as rt:
            hook = for_job(rt, webhook) if webhook else None
            if hook is not None:
                out.print(f"webhook {hook.id} secret (shown once): {hook.secret}", markup=False)
            hook_id = hook.id if hook else None
            job = service.sync(
                rt,
                dataset,
                spec,
                webhook=hook_id,
                budget_usd=budget_usd,
                budget_tokens=budget_tokens,
            )
            done = wait_for(job, sys.stderr.isatty())
            return done, service.report(rt, job.id)

    job, report = guarded(body)
    print_report(report)
    counts = job.counts
    note = f" ({job.message})" if job.message else ""
    out.print(f"job {job.id}: {job.status.value}{note}", markup=False)
    out.print(
        f"cognified documents {counts.get('documents', 0)}, chunks {counts.get('chunks', 0)}, "
        f"errors {len(job.errors)}; LLM calls {job.llm.calls} ({job.llm.cache_hits} from cache)",
        markup=False,
    )
    for error in job.errors:
        out.print(f"  failed {error.document_name}: {error.step}: {error.message}", markup=False)
    if job.status.value != "succeeded":
        raise typer.Exit(1)


def print_report(report: dict[str, Any] | None) -> None:
    """A sync's outcome, a line per document (up to 1,000 per outcome), then the counts."""
    if report is None:
        return
    for name in report.get("added", []):
        out.print(f"added      {name}", markup=False)
    for name in report.get("replaced", []):
        out.print(f"replaced   {name} (content changed)", markup=False)
    for old, new in report.get("renamed", []):
        out.print(f"renamed    {old} -> {new}", markup=False)
    for name in report.get("removed", []):
        out.print(f"removed    {name}", markup=False)
    for name, reason in report.get("rejected", []):
        out.print(f"rejected   {name}: {reason}", markup=False)
    counts = report.get("counts", {})
    out.print(", ".join(f"{counts.get(k, 0)} {k}" for k in counts), markup=False)


@app.command()
def beat() -> None:
    """Fire the schedules (`cogmill schedules`): run exactly one, beside the workers.

    A second beat waits and takes over if the first stops; it never fires a run twice.
    In embedded mode `cogmill serve` fires the schedules itself."""
    from workers.beat import StateScheduler
    from workers.celery_app import configure

    settings = Settings()
    if settings.embedded_broker:
        fail(
            "COGMILL_BROKER_URL is the in-process memory:// broker: `cogmill serve` fires the "
            "schedules inside itself there; run `cogmill beat` beside workers on a Redis broker",
            2,
        )
    configure(settings).Beat(
        scheduler=f"{StateScheduler.__module__}:{StateScheduler.__name__}",
        max_interval=settings.beat_tick_seconds,
        loglevel="INFO",
        remote_control=True,
        quiet=True,
    ).run()
