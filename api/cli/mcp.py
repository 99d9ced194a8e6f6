"""`cogmill mcp`: the MCP server over stdio, for agents (Claude Desktop, IDEs, any MCP client)."""

from __future__ import annotations

import typer

from api.cli.render import guarded

app = typer.Typer()


@app.command("mcp")
def mcp() -> None:
    """Serve cogmill's tools (add, cognify, search, memory...) to an MCP client over stdio.

    The client starts this command; it acts for the local default tenant on COGMILL_HOME (or
    the configured stores), like the other commands. Over the network, `cogmill serve` offers
    the same tools at /mcp with API keys."""
    from api.mcp.server import build_server, stdio_lifespan

    server = build_server(stdio_lifespan)
    guarded(lambda: server.run("stdio"))
