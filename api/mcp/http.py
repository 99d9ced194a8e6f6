"""The MCP server over streamable HTTP at `/mcp` of the API app, behind the API's own keys.

Every request passes the app's request guards (trusted Host, foreign Origin, body cap) like any
route, then the API's key check (`get_caller`, the same code as every route: 401 without a
usable key, 429 over the rate limit, 403 for a role that may not read), in the one error schema.
Its tools then act for that key's tenant on the API's runtime. The server runs stateless (no
MCP session is kept between requests), so any API process can answer any request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.concurrency import run_in_threadpool
from mcp.server import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from api.http.deps import get_caller, reader
from api.mcp.face import Access, Face
from api.mcp.server import build_server

PATH = "/mcp"
CALLER = "cogmill_caller"  # where a request's caller waits in its scope for the tools


@dataclass(frozen=True)
class KeyedAccess:
    """Each message acts for the caller its HTTP request was authenticated as."""

    def face(self, request: Any) -> Face:
        if not isinstance(request, Request) or CALLER not in request.scope.get("state", {}):
            raise RuntimeError("an MCP message over HTTP reached a tool without a caller")
        return Face(request.app.state.runtime, request.scope["state"][CALLER], remote=True)


@asynccontextmanager
async def _keyed(server: MCPServer[Any]) -> AsyncIterator[Access]:
    yield KeyedAccess()


class KeyedEndpoint:
    """The ASGI endpoint: the caller from the request's API key, then the MCP transport."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        runtime = request.app.state.runtime
        # A CogmillError raised here is answered by the app's handler, as for any route.
        caller = reader(await run_in_threadpool(get_caller, request, runtime))
        scope.setdefault("state", {})[CALLER] = caller
        await self.manager.handle_request(scope, receive, send)


def mcp_router() -> APIRouter:
    """A router serving MCP at /mcp; including it in an app also runs the MCP server with the
    app (a new server per app: its session manager runs once)."""
    server = build_server(_keyed)
    # The app's RequestGuard already checks Host and Origin against the API's settings.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security)
    manager = server.session_manager

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with manager.run():
            yield

    router = APIRouter(lifespan=lifespan)
    endpoint = KeyedEndpoint(manager)
    # POST only: a stateless server has nothing to push, so a GET stream would only hold a
    # connection open (clients take the 405 as "no stream"), and there is no session to DELETE.
    router.routes.append(Route(PATH, endpoint, methods=["POST"]))
    return router
