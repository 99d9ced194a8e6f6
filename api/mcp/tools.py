"""The MCP tools for datasets, documents and jobs: add, cognify, poll, list, delete.

Each tool parses its arguments (with the HTTP API's field bounds), checks the caller's role as
the HTTP routes do, calls one use case of api/services/ and returns its answer in the HTTP
API's response schema. Docstrings are the descriptions a model reads to choose a tool.
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from api.http.deps import reader, too_large, writer
from api.http.schemas import AddResult, DatasetPublic, DeleteResult, DocumentPublic, JobAccepted
from api.mcp.errors import guarded
from api.mcp.face import current
from api.services import datasets, delete, jobs, shown
from api.services.add import AddOptions, add_files, add_paths
from api.services.cognify import cognify as run_cognify
from api.services.jobs import JobReport
from workers.jobs import JobNotFoundError

Dataset = Annotated[
    str,
    Field(min_length=1, max_length=128, description="Dataset name (letters, digits, _ - .)"),
]
NodeSet = Annotated[
    str | None,
    Field(
        default=None,
        max_length=64,
        description="Optional group inside the dataset, e.g. coding_rules (searched by the "
        "CODING_RULES search type)",
    ),
]


class DatasetList(BaseModel):
    datasets: list[DatasetPublic]


class DocumentList(BaseModel):
    dataset: str
    documents: list[DocumentPublic]


# A poll that waits saves the model turns; bounded so a call never holds a worker for long.
MAX_WAIT_SECONDS = 60


def add_text(
    dataset: Dataset,
    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=255,
            description="Document file name; its extension gives the format: notes.txt, "
            "page.md, page.html, rows.csv, records.json",
        ),
    ],
    text: Annotated[str, Field(description="The document's full content")],
    node_set: NodeSet = None,
) -> AddResult:
    """Add one document, given as text, to a dataset (created if new). The same name with new
    content replaces the old version; the same content is skipped as unchanged. Nothing is
    searchable until you run cognify on the dataset."""
    face = current()
    caller = writer(face.caller)
    rt = face.runtime
    if len(text.encode()) > rt.settings.max_file_bytes:
        raise too_large(f"the text of {name!r}", rt.settings.max_file_bytes)
    folder = Path(tempfile.mkdtemp(prefix=".mcp-", dir=rt.settings.home))
    try:
        path = folder / "document"
        path.write_text(text, encoding="utf-8")
        added = add_files(rt, dataset, [(name, path)], AddOptions(node_set=node_set), caller)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return AddResult.from_report(added.report)


def add_files_tool(
    dataset: Dataset,
    paths: Annotated[
        list[str],
        Field(
            min_length=1,
            max_length=1000,
            description="Absolute paths of files or folders on this machine (folders are "
            "read recursively, hidden entries skipped)",
        ),
    ],
    node_set: NodeSet = None,
) -> AddResult:
    """Add files and folders from the local disk to a dataset (created if new): text, Markdown,
    HTML, PDF, Word, e-mail, CSV/TSV, JSON records, code, SQLite databases. Unsupported or
    empty files are reported as rejected with the reason. Only over a local (stdio) connection:
    a remote server cannot read your disk, so send contents with add_text there. Run cognify
    afterwards to make the documents searchable."""
    face = current()
    if face.remote:
        raise ToolError(
            "add_files reads paths on the server's own disk, which a remote (HTTP) client must "
            "not name; send each document's content with add_text, or upload files with "
            f"POST /api/v1/datasets/{dataset}/data"
        )
    added = add_paths(face.runtime, dataset, [Path(p) for p in paths], AddOptions(node_set))
    return AddResult.from_report(added.report)


def cognify(
    dataset: Dataset,
    everything: Annotated[
        bool, Field(description="Reprocess every document, not only new and changed ones")
    ] = False,
) -> JobAccepted:
    """Start building the knowledge graph and vectors of a dataset's new and changed documents.
    ASYNCHRONOUS: returns a job id at once, while the work runs in the background; call
    job_status with that id (wait_seconds lets one call wait) until its status is succeeded
    (or failed/cancelled) before searching. A job with nothing to do is already succeeded."""
    face = current()
    job = run_cognify(face.runtime, dataset, everything=everything, caller=writer(face.caller))
    return JobAccepted(job_id=job.id, status=job.status, message=job.message)


def job_status(
    job_id: Annotated[str, Field(min_length=1, max_length=64, description="From cognify")],
    wait_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description="Wait up to this many seconds for the job to finish before answering",
        ),
    ] = 0,
) -> JobReport:
    """A cognify job's status (queued, running, succeeded, failed, cancelled), its counts
    (documents, chunks, entities, relationships...), per-document errors and token usage.
    Poll it after cognify until the status is final; a nonzero wait_seconds saves polls."""
    face = current()
    caller = reader(face.caller)
    deadline = time.monotonic() + wait_seconds
    job = jobs.tracker(face.runtime).get(jobs.checked_id(job_id))
    if not caller.owns(job.dataset):  # another tenant's job: as if there were none
        raise JobNotFoundError(job_id)
    while not job.status.finished and time.monotonic() < deadline:
        time.sleep(0.2)
        job = jobs.tracker(face.runtime).get(job_id)
    return shown.job(caller, jobs.show(face.runtime, job_id))


def list_datasets() -> DatasetList:
    """Your datasets with their document counts."""
    face = current()
    found = datasets.list_datasets(face.runtime, reader(face.caller))
    return DatasetList(datasets=[DatasetPublic(name=d.name, documents=d.documents) for d in found])


def list_documents(
    dataset: Dataset,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=10_000)] = 1000,
) -> DocumentList:
    """A dataset's documents with their processing status (added: not cognified yet,
    processed, failed with its error)."""
    face = current()
    docs = datasets.documents(face.runtime, dataset, offset, limit, reader(face.caller))
    return DocumentList(dataset=dataset, documents=[DocumentPublic.from_node(d) for d in docs])


def delete_document(
    dataset: Dataset,
    document: Annotated[str, Field(min_length=1, description="The document's name, as added")],
) -> DeleteResult:
    """Delete one document from a dataset: its chunks and whatever only it supported (graph,
    vectors, keyword index); entities shared with other documents only lose its support.
    Refused while a cognify job runs on the dataset."""
    face = current()
    deleted = delete.delete_document(face.runtime, dataset, document, writer(face.caller))
    return DeleteResult(
        dataset=deleted.dataset,
        document=deleted.document,
        nodes_removed=deleted.nodes_removed,
        edges_removed=deleted.edges_removed,
    )


READ = ToolAnnotations(read_only_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
RECORDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)


def register(server: MCPServer[Any]) -> None:
    """Add the dataset, document and job tools to `server`."""
    entries: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
        (add_text, "add_text", WRITE),
        (add_files_tool, "add_files", WRITE),
        (cognify, "cognify", WRITE),
        (job_status, "job_status", READ),
        (list_datasets, "list_datasets", READ),
        (list_documents, "list_documents", READ),
        (delete_document, "delete_document", DESTRUCTIVE),
    ]
    for fn, name, hints in entries:
        add_tool(server, fn, name, hints)


def add_tool(
    server: MCPServer[Any], fn: Callable[..., Any], name: str, hints: ToolAnnotations
) -> None:
    """Register a guarded tool, its docstring (dedented) as its description."""
    description = inspect.cleandoc(fn.__doc__ or "")
    server.add_tool(guarded(fn), name=name, description=description, annotations=hints)
