"""Route dependencies: the runtime, the caller (API key), validated dataset names, and uploads
streamed to disk."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, BinaryIO

from fastapi import Depends, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from api.http.errors import (
    BadMultipart,
    FieldTooLong,
    FileTooLarge,
    NotAFile,
    QueryTooLong,
    TooManyDatasets,
    TooManyFiles,
    UnsupportedMediaType,
    UploadInterrupted,
)
from api.http.json_documents import MAX_DOCUMENTS, parse_upload
from api.http.schemas import DocumentsAdd
from api.services import datasets, jobs
from api.services.tenants import Tenants
from core.access import LOCAL, AccessDeniedError, Caller, Role
from core.errors import RateLimited, Unauthorized
from runtime import Runtime
from workers.jobs import JobNotFoundError

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MAX_FILES = MAX_DOCUMENTS
SPOOL_WRITE_BYTES = 1 << 20  # a JSON body's chunks are written to disk this much at a time


def get_runtime(request: Request) -> Runtime:
    """The runtime the app's lifespan installed."""
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_caller(request: Request, runtime: RuntimeDep) -> Caller:
    """Who the request acts for: the tenant and role of its `Authorization: Bearer` key (401
    without a usable one), or the local default tenant while auth is off (no key was ever
    created and COGMILL_AUTH is not `required`)."""
    tenants = Tenants(runtime.state)
    if runtime.settings.auth != "required" and not tenants.auth_configured():
        return LOCAL
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("send an API key as 'Authorization: Bearer KEY' (`cogmill keys create`)")
    client = request.client.host if request.client else "unknown"
    # Raises TooManyFailuresError (429) before hashing once a key id or address failed enough.
    record = tenants.authenticate(
        key.strip(), client, runtime.settings.api_auth_failures_per_minute
    )
    if record is None:
        raise Unauthorized("the API key is not valid (unknown, revoked or expired)")
    limit = runtime.settings.api_requests_per_minute
    if limit and (wait := tenants.throttle(record.id, limit)) is not None:
        raise RateLimited(
            f"this key made more than {limit} requests this minute "
            f"(COGMILL_API_REQUESTS_PER_MINUTE); retry in {math.ceil(wait)} s",
            retry_after=wait,
        )
    return Caller(record.tenant, record.role)


CallerDep = Annotated[Caller, Depends(get_caller)]


def _role(needed: Role, what: str) -> Callable[[Caller], Caller]:
    def check(caller: CallerDep) -> Caller:
        if not caller.role.allows(needed):
            message = f"a {caller.role.value} key may not {what}; it takes a {needed.value} key"
            raise AccessDeniedError(message)
        return caller

    return check


reader = _role(Role.READER, "read")
writer = _role(Role.WRITER, "change data")
Reader = Annotated[Caller, Depends(reader)]
Writer = Annotated[Caller, Depends(writer)]


def owned_job_id(
    job_id: Annotated[str, PathParam(description="Id returned by cognify")],
    runtime: RuntimeDep,
    caller: CallerDep,
) -> str:
    """The path's job id; JobNotFoundError for another tenant's job, as for an unknown one
    (the route's use case reports those)."""
    try:
        job = jobs.tracker(runtime).get(jobs.checked_id(job_id))
    except JobNotFoundError:
        return job_id
    if not caller.owns(job.dataset):
        raise JobNotFoundError(job_id)
    return job_id


def dataset_name(name: Annotated[str, PathParam(description="Dataset name")]) -> str:
    """The path's dataset name; CatalogError (400) says what is allowed."""
    return datasets.checked(name)


DatasetName = Annotated[str, Depends(dataset_name)]


def known_dataset(name: DatasetName, runtime: RuntimeDep, caller: CallerDep) -> str:
    """The name of a dataset of the caller's that exists; DatasetNotFoundError (404)
    otherwise."""
    datasets.existing(runtime, name, caller)
    return name


KnownDataset = Annotated[str, Depends(known_dataset)]


def check_bounds(runtime: Runtime, query: str, names: list[str]) -> None:
    """QueryTooLong or TooManyDatasets for a query or a list of datasets over the settings'
    bounds (the router and the searches are not linear in them)."""
    settings = runtime.settings
    if len(query) > settings.api_max_query_chars:
        raise QueryTooLong(
            f"the query has {len(query)} characters, over the limit of "
            f"{settings.api_max_query_chars} (COGMILL_API_MAX_QUERY_CHARS); shorten it",
        )
    if len(names) > settings.api_max_datasets:
        raise TooManyDatasets(
            f"{len(names)} datasets named, over the limit of {settings.api_max_datasets} "
            "(COGMILL_API_MAX_DATASETS); search fewer at once",
        )


@dataclass
class Upload:
    """One received document: its name and the temp file holding its bytes."""

    name: str
    path: Path


@dataclass
class Uploads:
    """A request's documents and the form fields sent beside them."""

    files: list[Upload]
    node_set: str | None = None
    document_date: str | None = None


# Form fields allowed beside the files (multipart) and their size bound in bytes.
FORM_FIELDS = {"node_set": 256, "document_date": 64}


def too_large(what: str, limit: int) -> FileTooLarge:
    return FileTooLarge(
        f"{what} is larger than the limit of {limit} bytes; split it, or raise "
        "COGMILL_MAX_FILE_BYTES on the server",
    )


class _PartsToFiles:
    """python-multipart callbacks writing each file part to its own temp file."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder, self.limit = folder, limit
        self.uploads: list[Upload] = []
        self.fields: dict[str, str] = {}
        self._field: str | None = None  # the form field being read, None in a file part
        self._text = bytearray()
        # File writes wait here and run off the event loop in flush(); None closes the file.
        self.pending: list[tuple[BinaryIO, bytes | None]] = []
        self._files: list[BinaryIO] = []
        self._header, self._value, self._disposition = b"", b"", b""
        self._size = 0

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
        }

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def on_header_end(self) -> None:
        if self._header.lower() == b"content-disposition":
            self._disposition = self._value
        self._header, self._value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._disposition, self._size = b"", 0
        if b"filename" not in options:
            field = options.get(b"name", b"").decode("utf-8", "replace")
            if field not in FORM_FIELDS:
                message = (
                    f"form field {field!r} is not a file; send files as 'files' parts "
                    f"(and optionally {', '.join(FORM_FIELDS)})"
                )
                raise NotAFile(message)
            self._field, self._text = field, bytearray()
            return
        self._field = None
        if len(self.uploads) >= MAX_FILES:
            raise TooManyFiles(f"at most {MAX_FILES} files per request")
        # Keep only the base name: some clients send a path, and the name is a label, never a path.
        raw = options[b"filename"].decode("utf-8", "replace").replace("\\", "/")
        self.uploads.append(Upload(PurePosixPath(raw).name, self.folder / str(len(self.uploads))))
        self._files.append(self.uploads[-1].path.open("wb"))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._field is not None:
            self._text += data[start:end]
            if len(self._text) > FORM_FIELDS[self._field]:
                limit = FORM_FIELDS[self._field]
                raise FieldTooLong(f"{self._field} is over {limit} bytes")
            return
        self._size += end - start
        if self._size > self.limit:
            raise too_large(f"file {self.uploads[-1].name!r}", self.limit)
        self.pending.append((self._files[-1], data[start:end]))

    def on_part_end(self) -> None:
        if self._field is not None:
            self.fields[self._field] = self._text.decode("utf-8", "replace")
            return
        self.pending.append((self._files[-1], None))

    def flush(self) -> None:
        for file, data in self.pending:
            if data is None:
                file.close()
            else:
                file.write(data)
        self.pending.clear()

    def close(self) -> None:
        for file in self._files:
            file.close()


async def _receive_files(request: Request, folder: Path, limit: int) -> Uploads:
    _, params = parse_options_header(request.headers["content-type"])
    sink = _PartsToFiles(folder, limit)
    try:
        parser = MultipartParser(params.get(b"boundary", b""), sink.callbacks())
        async for chunk in request.stream():
            parser.write(chunk)
            if sink.pending:
                await run_in_threadpool(sink.flush)
        parser.finalize()
    except FormParserError as err:
        # The parser's text is no use to a client; say what to send.
        message = "malformed multipart/form-data body; send files as 'files' parts"
        raise BadMultipart(message) from err
    finally:
        sink.close()
    fields = sink.fields
    return Uploads(
        sink.uploads, fields.get("node_set") or None, fields.get("document_date") or None
    )


async def _receive_documents(request: Request, folder: Path, limit: int) -> Uploads:
    """JSON texts: the body spooled to disk as it comes, then read with each document's text
    streamed to its own file (api/http/json_documents.py), so no text is held whole."""
    spooled = folder / "body.json"
    with spooled.open("wb") as out:
        pending: list[bytes] = []
        async for chunk in request.stream():
            pending.append(chunk)
            if sum(map(len, pending)) >= SPOOL_WRITE_BYTES:
                await run_in_threadpool(out.writelines, pending)
                pending = []
        await run_in_threadpool(out.writelines, pending)
    try:  # MalformedJSON, TextTooLarge and TooManyDocuments answer as they are
        parsed = await run_in_threadpool(parse_upload, spooled, folder, limit)
    finally:
        await run_in_threadpool(spooled.unlink, True)
    try:
        received = DocumentsAdd.model_validate(parsed.body)
    except ValidationError as err:
        raise RequestValidationError(err.errors(include_url=False)) from err
    uploads = []
    for doc, path in zip(received.documents, parsed.texts, strict=True):
        assert path is not None  # a text that is a string was streamed to a file
        uploads.append(Upload(doc.name, path))
    return Uploads(uploads, received.node_set, received.document_date)


async def receive_uploads(request: Request, runtime: RuntimeDep) -> AsyncIterator[Uploads]:
    """The request's documents (multipart files or JSON texts), each in its own temp file, and
    the node set they were sent for."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    receivers = {"multipart/form-data": _receive_files, "application/json": _receive_documents}
    if kind not in receivers:
        raise UnsupportedMediaType(
            "send files as multipart/form-data 'files' parts, or JSON "
            '{"documents": [{"name": "notes.txt", "text": "..."}]}',
        )
    # Under COGMILL_HOME rather than /tmp, which may be memory-backed (tmpfs).
    folder = Path(tempfile.mkdtemp(prefix=".upload-", dir=runtime.settings.home))
    try:
        yield await receivers[kind](request, folder, runtime.settings.max_file_bytes)
    except ClientDisconnect as err:  # nobody reads the answer, but it is no server bug
        raise UploadInterrupted("the client disconnected; send again") from err
    finally:
        await run_in_threadpool(shutil.rmtree, folder, True)


UploadsDep = Annotated[Uploads, Depends(receive_uploads)]
