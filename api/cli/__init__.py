"""The `cogmill` command line, a module per command group.

ingest: add, add-sql, cognify · datasets: delete, export · search: search, route · facts:
facts · jobs: list, show, cancel, watch · ops: worker, serve, demo, eval · memory: remember,
recall, improve, forget · access: tenants create|list, keys create|list|revoke · mcp: the MCP
server over stdio · webhooks: add|list|remove (and `jobs webhooks ID`, a job's deliveries) ·
sync: sync, beat · schedules: add|list|pause|resume|remove.
Exit codes: 0 success, 1 failure, 2 usage error. Errors print one line, never a traceback.

The command groups are imported when `app` is first asked for, not with this package: they
import the Celery app, which reads the settings, and `main` checks those first so that a bad
COGMILL_* value is one line too.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Annotated

import typer


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"cogmill {version('cogmill')}")
        raise typer.Exit()


@functools.cache
def _app() -> typer.Typer:
    from api.cli import (
        access,
        datasets,
        facts,
        ingest,
        jobs,
        mcp,
        memory,
        ops,
        schedules,
        search,
        sync,
        webhooks,
    )
    from api.cli.helptext import styled

    app = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def root(
        version: Annotated[
            bool,
            typer.Option(
                "--version", callback=_print_version, is_eager=True, help="Print the version."
            ),
        ] = False,
    ) -> None:
        """cogmill: knowledge-graph memory for LLM applications.

        Run `cogmill COMMAND --help` for a command's options."""

    app.add_typer(ingest.app)
    app.add_typer(datasets.app)
    app.add_typer(search.app)
    app.add_typer(facts.app)
    app.add_typer(jobs.app, name="jobs")
    app.add_typer(ops.app)
    app.add_typer(memory.app)
    app.add_typer(access.tenants_app, name="tenants")
    app.add_typer(access.keys_app, name="keys")
    app.add_typer(webhooks.app, name="webhooks")
    jobs.app.command("webhooks")(webhooks.job_deliveries)
    app.add_typer(mcp.app)
    app.add_typer(sync.app)
    app.add_typer(schedules.app, name="schedules")
    return styled(app)


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `from api.cli import app`
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def settings_errors() -> list[str]:
    """One line per COGMILL_* setting (environment or .env) that does not validate."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from core.errors import problem
    from core.settings import Settings

    try:
        Settings()
    except SettingsError as error:  # a list or mapping setting that is not JSON
        field = re.search(r'field "(\w+)"', str(error))
        name = f"COGMILL_{field[1].upper()}" if field else str(error)
        return [f"{name} is not JSON; such settings are JSON lists or objects, e.g. [15, 60]"]
    except ValidationError as error:
        return [
            problem(f"COGMILL_{'_'.join(map(str, e['loc'])).upper()}", e) for e in error.errors()
        ]
    return []


def main() -> None:
    """Console-script entry point."""
    if problems := settings_errors():
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        where = "in the environment or .env; see docs/configuration.md"
        print(f"error: fix or unset those settings ({where})", file=sys.stderr)
        raise SystemExit(2)
    _app()(prog_name="cogmill")
