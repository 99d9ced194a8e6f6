"""A call of the HTTP API to build: the route, its parameters and body, and how its answer is
read. Client and AsyncClient send the same calls; `ENDPOINTS` maps each client method to its
route (checked against the OpenAPI document by a test, both ways)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

T = TypeVar("T")
P = ParamSpec("P")

# Client method name -> (HTTP method, path template of the OpenAPI document).
ENDPOINTS: dict[str, tuple[str, str]] = {}
FileInput = str | Path | tuple[str, bytes]


@dataclass(frozen=True)
class Parts(Generic[T]):
    """What a builder decides: how to read the answer, and what to send."""

    read: Callable[[httpx.Response], T]
    path: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] | None = None
    json: Any = None
    files: list[tuple[str, tuple[str, bytes]]] | None = None
    data: Mapping[str, str] | None = None
    also_ok: frozenset[int] = frozenset()  # error statuses whose body is still the answer


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, ready to send."""

    method: str
    url: str
    parts: Parts[T]


def operation(method: str, path: str) -> Callable[[Callable[P, Parts[T]]], Callable[P, Call[T]]]:
    """Register a builder as the client method of its name, sending `method path`."""

    def register(build: Callable[P, Parts[T]]) -> Callable[P, Call[T]]:
        ENDPOINTS[build.__name__] = (method, path)

        @wraps(build)
        def call(*args: P.args, **kwargs: P.kwargs) -> Call[T]:
            parts = build(*args, **kwargs)
            quoted = {name: quote(str(value), safe="") for name, value in parts.path.items()}
            return Call(method, path.format(**quoted), parts)

        return call

    return register


def model(kind: Any) -> Callable[[httpx.Response], Any]:
    """Read a JSON answer as `kind` (a model, or a list of them)."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return lambda response: adapter.validate_json(response.content)


def text(response: httpx.Response) -> str:
    """Read a text answer (an export, the metrics) as it came."""
    return response.text


def body(request: BaseModel) -> dict[str, Any]:
    """A request model as JSON, without the fields left unset (the server's defaults apply)."""
    return request.model_dump(mode="json", exclude_none=True)


def names(datasets: str | Sequence[str]) -> list[str]:
    """One dataset name or several, as a list."""
    return [datasets] if isinstance(datasets, str) else list(datasets)


def params_of(**params: Any) -> dict[str, Any]:
    """Query parameters without those left unset (the server's defaults apply)."""
    return {name: value for name, value in params.items() if value is not None}
