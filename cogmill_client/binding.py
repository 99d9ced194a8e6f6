"""What Client and AsyncClient share: a call builder bound as a method (with the builder's
signature and docstring, typed), the headers, and the HTTP timeouts."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

import httpx

from cogmill_client.calls import ENDPOINTS, Call
from cogmill_client.errors import error_from

T = TypeVar("T")
P = ParamSpec("P")
DEFAULT_TIMEOUT = 60.0  # seconds; above the server's stream heartbeat (15 s) so streams idle well


def backoff(failures: int) -> float:
    """Seconds to wait before reconnecting a stream after `failures` failures in a row."""
    return 0.0 if failures == 0 else min(0.5 * 2**failures, 10.0)


def check_deadline(deadline: float | None, job_id: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(f"job {job_id} did not finish in time (GET /api/v1/jobs/{job_id})")


def headers(api_key: str | None) -> dict[str, str]:
    """Request headers: the key as a bearer token, when there is one."""
    sent = {"User-Agent": "cogmill-client"}
    if api_key:
        sent["Authorization"] = f"Bearer {api_key}"
    return sent


def answer(call: Call[T], response: httpx.Response) -> T:
    """The call's answer read from a response; an error answer raised as a CogmillError."""
    if response.is_error and response.status_code not in call.parts.also_ok:
        raise error_from(response)
    return call.parts.read(response)


def request_args(call: Call[Any]) -> dict[str, Any]:
    """httpx.request keyword arguments of a call."""
    parts = call.parts
    return {"params": parts.params, "json": parts.json, "files": parts.files, "data": parts.data}


class _Bound(Generic[P, T]):
    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        # The ENDPOINTS table is keyed by builder names: a method must carry its builder's name.
        if name != self.build.__name__ or name not in ENDPOINTS:
            raise TypeError(f"{owner.__name__}.{name} binds {self.build.__name__}")


class SyncSender(Protocol):
    def send(self, call: Call[T]) -> T: ...


class AsyncSender(Protocol):
    async def send(self, call: Call[T]) -> T: ...


class sync_method(_Bound[P, T]):  # noqa: N801 - used as a decorator-like binding
    """A call builder as a method of Client: builds the call and sends it."""

    @overload
    def __get__(self, client: None, owner: type) -> sync_method[P, T]: ...
    @overload
    def __get__(self, client: SyncSender, owner: type) -> Callable[P, T]: ...
    def __get__(self, client: SyncSender | None, owner: type) -> Any:
        if client is None:
            return self
        build = self.build

        @wraps(build)
        def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return client.send(build(*args, **kwargs))

        return method


class async_method(_Bound[P, T]):  # noqa: N801
    """A call builder as a coroutine method of AsyncClient."""

    @overload
    def __get__(self, client: None, owner: type) -> async_method[P, T]: ...
    @overload
    def __get__(self, client: AsyncSender, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, client: AsyncSender | None, owner: type) -> Any:
        if client is None:
            return self
        build = self.build

        @wraps(build)
        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await client.send(build(*args, **kwargs))

        return method
