"""Error answers of the cogmill HTTP API as exceptions carrying the one error schema."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import httpx


class CogmillError(Exception):
    """An error answer: its HTTP `status`, the schema's `code` and `message`, the whole parsed
    body as `detail`, and `retry_after` (seconds) when the server sent Retry-After."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        detail: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.detail = detail or {}
        self.retry_after = retry_after


class BadRequestError(CogmillError):
    """400: e.g. a bad dataset name."""


class AuthenticationError(CogmillError):
    """401: no usable API key."""


class PermissionDeniedError(CogmillError):
    """403: the key's role may not do this."""


class NotFoundError(CogmillError):
    """404: no such dataset, document, job, session or webhook (for this tenant)."""


class ConflictError(CogmillError):
    """409: e.g. a cognify job on the dataset is running."""


class PayloadTooLargeError(CogmillError):
    """413: a file, the upload or the body is over its limit, or a storage quota is used up."""


class UnprocessableEntityError(CogmillError):
    """422: the request failed validation."""


class RateLimitError(CogmillError):
    """429: requests per minute or open event streams used up; retry after `retry_after` s."""


class ServerError(CogmillError):
    """5xx: 503 when a store or backend is unavailable (retry later), 500 a server bug."""


class StreamEndedError(Exception):
    """A job's event stream ended before its `finished` event, again and again."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"the event stream of job {job_id} ended before the job finished")
        self.job_id = job_id


BY_STATUS: dict[int, type[CogmillError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: not sent by cogmill
        return None


def error_from(response: httpx.Response, body: bytes | None = None) -> CogmillError:
    """The exception for an error answer (its body read already, or passed as `body`)."""
    raw = response.content if body is None else body
    status = response.status_code
    try:
        detail = json.loads(raw)
        error = detail["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):  # not cogmill's schema (a proxy's page?)
        detail = {}
        known = status in HTTPStatus._value2member_map_
        code = HTTPStatus(status).phrase.lower().replace(" ", "_") if known else "error"
        message = raw[:500].decode("utf-8", "replace")
    kind = BY_STATUS.get(status) or (ServerError if status >= 500 else CogmillError)
    return kind(status, code, message, detail, _retry_after(response))
