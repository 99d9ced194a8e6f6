"""A typed Python client of the cogmill HTTP API (needs only httpx and pydantic).

    from cogmill_client import Client
    c = Client("http://127.0.0.1:8000", api_key="...")
    print(c.search("Who founded Siemens?", "demo").answer)

`AsyncClient` has the same methods as coroutines. Error answers raise `CogmillError`
subclasses carrying the server's error schema (status, code, message, detail).
"""

from cogmill_client.async_client import AsyncClient
from cogmill_client.client import Client
from cogmill_client.errors import (
    AuthenticationError,
    BadRequestError,
    CogmillError,
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    StreamEndedError,
    UnprocessableEntityError,
)
from cogmill_client.events import JobEvent, Progress
from cogmill_client.models import JobStatus, SearchType

__all__ = [
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "CogmillError",
    "ConflictError",
    "JobEvent",
    "JobStatus",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Progress",
    "RateLimitError",
    "SearchType",
    "ServerError",
    "StreamEndedError",
    "UnprocessableEntityError",
]
