"""Errors of the API's own request checks (framing, size, bounds), and their HTTP answer.

The MCP face shares the checks on queries and sizes. Every answer goes through the one
mapping (api/errors.py); only the HTTP headers an error calls for are added here.
"""

from __future__ import annotations

import math

from fastapi.responses import JSONResponse

from api.errors import answer
from api.http.schemas import ErrorDetail, ErrorResponse
from core.errors import BadRequest, Forbidden, InvalidInput, RateLimited, TooLarge


class UntrustedHost(BadRequest):
    """The Host header names a host this server does not serve (COGMILL_API_TRUSTED_HOSTS)."""

    code = "untrusted_host"


class BadMultipart(BadRequest):
    """The multipart/form-data body cannot be parsed."""

    code = "bad_multipart"


class UploadInterrupted(BadRequest):
    """The client disconnected before its upload was received."""

    code = "upload_interrupted"


class ForeignOrigin(Forbidden):
    """A state-changing request from another site's page (COGMILL_API_ALLOWED_ORIGINS)."""

    code = "foreign_origin"


class UnsupportedMediaType(InvalidInput):
    """The body's Content-Type is not one the route takes."""

    code, status = "unsupported_media_type", 415


class NotAFile(InvalidInput):
    """A multipart form field that is neither a file nor a known field."""

    code = "not_a_file"


class FieldTooLong(InvalidInput):
    """A form field beside the files is over its size."""

    code = "field_too_long"


class QueryTooLong(InvalidInput):
    """The query is over COGMILL_API_MAX_QUERY_CHARS."""

    code = "query_too_long"


class TooManyDatasets(InvalidInput):
    """More datasets named at once than COGMILL_API_MAX_DATASETS."""

    code = "too_many_datasets"


class BodyTooLarge(TooLarge):
    """The request body or upload is over COGMILL_API_MAX_BODY_BYTES / _MAX_UPLOAD_BYTES."""

    code = "body_too_large"


class FileTooLarge(TooLarge):
    """One file or text is over COGMILL_MAX_FILE_BYTES."""

    code = "file_too_large"


class TooManyFiles(TooLarge):
    """More files in one upload than the route takes."""

    code = "too_many_files"


def error_response(error: BaseException, where: str = "") -> JSONResponse:
    """The one error schema with the error's status (and WWW-Authenticate or Retry-After)."""
    said = answer(error, "http", where)
    body = ErrorResponse(error=ErrorDetail(code=said.code, message=said.message))
    response = JSONResponse(body.model_dump(), status_code=said.status)
    if said.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, RateLimited) and error.retry_after is not None:
        response.headers["Retry-After"] = str(math.ceil(error.retry_after))
    return response
