"""The MCP tool that syncs a dataset with a source (a folder, a git repository, SQL tables)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from pydantic import Field

from api.http.deps import writer
from api.http.schemas import JobAccepted
from api.mcp.face import current
from api.mcp.tools import WRITE, Dataset, add_tool
from api.services import sync as service
from pipelines.sources.spec import parse_source


def sync(
    dataset: Dataset,
    source: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="A folder or git repository path, a git URL (https, ssh) or a "
            "SQLAlchemy URL (sqlite:///shop.db)",
        ),
    ],
    kind: Annotated[
        Literal["folder", "git", "sql"] | None, Field(description="Default: guessed")
    ] = None,
    ref: Annotated[str | None, Field(max_length=255, description="Git branch or tag")] = None,
    include: Annotated[list[str] | None, Field(max_length=64, description="Globs to take")] = None,
    exclude: Annotated[list[str] | None, Field(max_length=64, description="Globs to skip")] = None,
) -> JobAccepted:
    """Make a dataset (created if new) mirror a folder, a git repository or SQL tables:
    new files are added, changed ones replaced, removed ones deleted, and exactly what changed
    is cognified. ASYNCHRONOUS: returns a job id at once; poll job_status until its status is
    succeeded. Call it again later to follow the source (only changes are processed). Over a
    remote (HTTP) connection a path must be inside the server's COGMILL_SYNC_ROOTS."""
    face = current()
    fields: dict[str, Any] = {"ref": ref, "include": include or [], "exclude": exclude or []}
    spec = parse_source(source, kind, **fields)
    job = service.sync(face.runtime, dataset, spec, writer(face.caller), remote=face.remote)
    return JobAccepted(job_id=job.id, status=job.status, message=job.message)


def register(server: MCPServer[Any]) -> None:
    """Add the sync tool to `server`."""
    add_tool(server, sync, "sync", WRITE)
