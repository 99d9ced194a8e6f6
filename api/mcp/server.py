"""The MCP server: one MCPServer with cogmill's tools and resources, whatever the transport.

Its lifespan yields the Access that names each message's Face (api/mcp/face.py): stdio opens a
runtime of its own for the local default tenant; HTTP (api/mcp/http.py) reads the API key of
each request. Tools and resources only parse, call a use case of api/services/ and answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from api.mcp import resources, search_tools, sync_tools, tools
from api.mcp.face import Access, LocalAccess, acting_as
from core.settings import Settings

INSTRUCTIONS = """\
cogmill is a knowledge-graph memory over the documents you add to named datasets.
Typical session: list_datasets; add_text / add_files into a dataset; cognify it (asynchronous:
it returns a job id at once; poll job_status until the status is succeeded), or sync a dataset
with a folder, git repository or database (a job too); then search, whose
results carry their sources (document and chunk): cite them. remember and recall keep notes
across a conversation. Dataset names: letters, digits, '_', '-', '.'."""


async def _with_face(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    with acting_as(ctx.lifespan_context.face(ctx.request)):
        return await call_next(ctx)


@asynccontextmanager
async def stdio_lifespan(server: MCPServer[Any]) -> AsyncIterator[Access]:
    """A runtime from Settings() (with embedded worker threads, so cognify jobs run in this
    process when the broker is in-process), open while the server runs."""
    from workers.embedded import open_runtime

    opened = open_runtime(Settings(), with_worker=True)
    runtime = await anyio.to_thread.run_sync(opened.__enter__)
    try:
        yield LocalAccess(runtime)
    finally:
        await anyio.to_thread.run_sync(opened.__exit__, None, None, None)


def _version() -> str:
    try:
        return version("cogmill")
    except PackageNotFoundError:  # running from a checkout that is not installed
        return "0.0.0"


def build_server(
    lifespan: Callable[[MCPServer[Any]], AbstractAsyncContextManager[Access]],
) -> MCPServer[Any]:
    """The MCP server with every tool and resource; `lifespan` yields the Access."""
    # MCPServer configures the root logger (logging.basicConfig with a rich handler); the
    # process' logging is cogmill's (and uvicorn's) to set, so it is put back as it was.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    server: MCPServer[Any] = MCPServer(
        "cogmill", instructions=INSTRUCTIONS, version=_version(), lifespan=lifespan
    )
    root.handlers[:] = handlers
    root.setLevel(level)
    server.middleware.append(_with_face)
    tools.register(server)
    search_tools.register(server)
    sync_tools.register(server)
    resources.register(server)
    return server
