"""The `cogmill` command line, a module per command group.

ingest: add, add-sql, cognify, delete, export · search: search, route · jobs: list, show,
cancel, watch · ops: worker, serve, demo, eval · memory: remember, recall, improve, forget ·
access: tenants create|list, keys create|list|revoke · mcp: the MCP server over stdio ·
webhooks: add|list|remove (and `jobs webhooks ID`, a job's deliveries).
Exit codes: 0 success, 1 failure, 2 usage error. Errors print one line, never a traceback.
"""

from __future__ import annotations

import typer

from api.cli import access, ingest, jobs, mcp, memory, ops, search, webhooks

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="cogmill: knowledge-graph memory for LLM applications.",
)
app.add_typer(ingest.app)
app.add_typer(search.app)
app.add_typer(jobs.app, name="jobs")
app.add_typer(ops.app)
app.add_typer(memory.app)
app.add_typer(access.tenants_app, name="tenants")
app.add_typer(access.keys_app, name="keys")
app.add_typer(webhooks.app, name="webhooks")
jobs.app.command("webhooks")(webhooks.job_deliveries)
app.add_typer(mcp.app)


def main() -> None:
    """Console-script entry point."""
    app()
