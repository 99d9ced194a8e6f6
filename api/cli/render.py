"""What every `cogmill` command shares: the consoles, the error guard, the runtime, printing.

Exit codes: 0 success, 1 failure, 2 usage error. Errors print one line, never a traceback:
a command's through the one mapping (api/errors.py), a usage error (an unknown option, a
value out of range) through `helptext.usage_message`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn, Protocol, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from api.errors import answer
from api.services import jobs
from core.models.jobs import Job
from core.settings import Settings
from retrieval.models import SearchResponse

if TYPE_CHECKING:
    from api.services.add import Added
    from retrieval.models import Source
    from runtime import Runtime

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")


class Ranked(Protocol):
    """A search or recall result as printed."""

    text: str
    score: float
    sources: list[Source]


R = TypeVar("R", bound=Ranked)


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"error: {message}", markup=False)
    raise typer.Exit(code)


@contextmanager
def runtime_session(with_worker: bool = False) -> Iterator[Runtime]:
    """A Runtime for this command (and embedded worker threads when the broker is in-process)."""
    from workers.embedded import open_runtime

    with open_runtime(Settings(), with_worker=with_worker) as runtime:
        yield runtime


def guarded(action: Callable[[], T]) -> T:
    """Run a command body; an exception becomes one line and its exit code (api/errors.py)."""
    try:
        return action()
    except typer.Exit:
        raise
    except Exception as error:
        said = answer(error, "cli")
        fail(said.message, said.exit_code)


def wait_for(job: Job, show_progress: bool) -> jobs.JobReport:
    """Poll a job until it finishes, with a progress bar on a terminal, else progress lines
    (both on stderr, so stdout keeps only the result)."""
    from runtime import current_runtime

    rt = current_runtime()
    if not show_progress:
        return _wait_with_lines(rt, job)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} docs"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err, disable=not show_progress, transient=True) as progress:
        bar = progress.add_task(f"cognify {job.dataset}", total=job.total_documents)
        while not job.status.finished:
            time.sleep(0.2)
            job = jobs.show(rt, job.id)
            done = job.counts.get("documents", 0) + len({e.document_id for e in job.errors})
            progress.update(bar, completed=done)
    return jobs.show(rt, job.id)


PROGRESS_EVERY_S, QUIET_LINE_S = 1.0, 30.0


def _wait_with_lines(rt: Runtime, job: Job) -> jobs.JobReport:
    """A line when the documents done change (at most one a second) or after 30 s of quiet."""
    started = said_at = time.monotonic()
    said = -1
    err.print(f"cognify {job.dataset}: job {job.id}, {job.total_documents} documents", markup=False)
    while not job.status.finished:
        time.sleep(0.2)
        job = jobs.show(rt, job.id)
        done = job.counts.get("documents", 0) + len({e.document_id for e in job.errors})
        now = time.monotonic()
        if (done != said and now - said_at >= PROGRESS_EVERY_S) or now - said_at >= QUIET_LINE_S:
            line = f"cognify {job.dataset}: {done}/{job.total_documents} documents"
            err.print(f"{line}, {now - started:.0f} s", markup=False)
            said, said_at = done, now
    return jobs.show(rt, job.id)


def print_added(added: Added) -> None:
    """What an add did, a line per input; exit 1 when every input was rejected."""
    report = added.report
    if added.copied_tables:
        out.print(f"copied tables {', '.join(added.copied_tables)}", markup=False)
    if added.relinked_tables:
        out.print(
            f"keys declared for {', '.join(added.relinked_tables)}; the next cognify "
            "relinks the dataset's tables"
        )
    for name in report.added:
        out.print(f"added      {name}", markup=False)
    for name in report.replaced:
        out.print(f"replaced   {name} (content changed)", markup=False)
    for name in report.unchanged:
        out.print(f"unchanged  {name} (same content, skipped)", markup=False)
    for name, reason in report.rejected:
        out.print(f"rejected   {name}: {reason}", markup=False)
    out.print(
        f"{len(report.added)} added, {len(report.replaced)} replaced, "
        f"{len(report.unchanged)} unchanged, {len(report.rejected)} rejected "
        f"in dataset {added.dataset}"
    )
    if report.rejected and not added.stored:
        raise typer.Exit(1)


def print_ranked(results: Sequence[R], label: Callable[[R], str]) -> None:
    """Ranked results: score, `label` (rich markup) and the documents, then the text."""
    if not results:
        out.print("no results")
    for rank, result in enumerate(results, 1):
        names = ", ".join(dict.fromkeys(s.document_name for s in result.sources))
        out.print(f"[bold]{rank}.[/bold] ({result.score:.3f}) {label(result)}[cyan]{names}[/cyan]")
        out.print("   " + result.text.replace("\n", "\n   ")[:600], markup=False)


def print_response(response: SearchResponse, as_json: bool) -> None:
    if as_json:
        out.print_json(response.model_dump_json())
        return
    if response.note:
        out.print(f"[dim]{response.note}[/dim]")
    print_ranked(response.results, lambda result: "")
