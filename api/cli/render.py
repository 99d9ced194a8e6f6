"""What every `cogmill` command shares: the consoles, the error guard, the runtime, printing.

Exit codes: 0 success, 1 failure, 2 usage error. Errors print one line, never a traceback:
a command's through the one mapping (api/errors.py), a usage error (an unknown option, a
value out of range) through `usage_message`.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from typer.core import TyperGroup

from api.errors import answer
from api.services import jobs
from core.errors import lower_first, problem
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


class Group(TyperGroup):
    """The `cogmill` command group: a usage error is one line in cogmill's words (exit 2),
    not click's box."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except typer.Abort:
            err.print("error: aborted", markup=False)
            sys.exit(1)
        except typer.TyperException as error:  # typer's click: usage and file errors
            if type(error).__name__ == "NoArgsIsHelpError":  # a group run bare: its help
                err.print(error.message, markup=False, end="")
            else:
                err.print(f"error: {usage_message(error)}", markup=False)
            sys.exit(error.exit_code)
        # Not standalone, click returns a typer.Exit's code, else the command's return value.
        sys.exit(code if isinstance(code, int) else 0)


def usage_message(error: typer.TyperException) -> str:
    """A usage error of typer's click as `WHAT is wrong; how to see the usage`."""
    ctx = getattr(error, "ctx", None)
    path = " ".join(["cogmill", *ctx.command_path.split()[1:]]) if ctx else "cogmill"
    see = f"`{path} --help` shows the usage"
    param = getattr(error, "param", None)
    option = getattr(error, "option_name", None)
    if param is not None:
        name = _name(param)
        if type(error).__name__ == "MissingParameter":
            return f"{name} is missing; {see}"
        return f"{_bad_value(name, error)}; {see}"
    if option is not None and hasattr(error, "possibilities"):  # no such option
        options = " or ".join(error.possibilities or [])
        maybe = f" (did you mean {options}?)" if options else ""
        return f"{path} has no option {option}{maybe}; {see}"
    if option is not None and "requires an argument" in error.message:
        return f"{option} needs a value; {see}"
    return f"{lower_first(error.message.rstrip('.'))}; {see}"


def _name(param: Any) -> str:
    """An option by its long name (--top-k), an argument by its metavar (JOB_ID)."""
    longs = [opt for opt in getattr(param, "opts", []) if opt.startswith("--")]
    return longs[0] if longs else str(param.name or "argument").upper()


_CHOICES = re.compile(r"^(?P<value>.+?) is not one of (?P<choices>.+?)\.?$")


def _bad_value(name: str, error: typer.TyperException) -> str:
    """`NAME must be ..., got VALUE`: typer checks values with pydantic, whose error is the
    cause; a callback's own message is used as it is."""
    cause = error.__cause__
    if isinstance(cause, ValidationError) and cause.errors():
        first = cause.errors()[0]
        text = str(first.get("msg", "")).removeprefix("Value error, ")
        choices = _CHOICES.match(text)
        if choices:
            listed = choices["choices"].replace("'", "")
            return f"{name} must be one of {listed}; got {choices['value']}"
        return problem(name, first)
    return f"{name}: {lower_first(error.message.rstrip('.'))}"


def wait_for(job: Job, show_progress: bool) -> jobs.JobReport:
    """Poll a job until it finishes, with a progress bar on a terminal."""
    from runtime import current_runtime

    rt = current_runtime()
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
        out.print_json(response.model_dump_json(exclude_none=True))
        return
    if response.note:
        out.print(f"[dim]{response.note}[/dim]")
    print_ranked(response.results, lambda result: "")
