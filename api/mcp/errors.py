"""Exceptions of the use cases as MCP tool errors, through the one mapping (api/errors.py).

A tool error comes back to the model as a result with `isError` set and one line of text saying
what to do, with hints naming tools and resources. Server-side failures (a store down, a
missing model) say only what failed, as the HTTP API's 5xx bodies do; anything unforeseen is
logged with its traceback and reported as a bug, never as a stack trace in the answer.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar, cast

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from api.errors import answer
from core.errors import problem

P = ParamSpec("P")
T = TypeVar("T")


def arguments_refused(tool: str, error: ValidationError) -> ToolError:
    """Arguments that do not fit a tool's input schema, in cogmill's words (the SDK's answer
    is pydantic's text and a link to its docs)."""
    said = [
        problem(".".join(str(part) for part in e["loc"]) or "the arguments", e)
        for e in error.errors(include_url=False)
    ]
    return ToolError(f"{tool}: {'; '.join(said)}; tools/list gives each argument's schema")


def tool_error(tool: str, exc: Exception) -> ToolError:
    """The tool error a use case's exception becomes."""
    return ToolError(answer(exc, "mcp", f"tool={tool}").message)


def guarded(fn: Callable[P, T]) -> Callable[P, T]:
    """A tool whose exceptions come back as tool errors with safe messages (a coroutine
    function stays one, so the server awaits it on the event loop)."""
    if inspect.iscoroutinefunction(fn):
        return cast(Callable[P, T], _guarded_async(fn))

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_error(fn.__name__, exc) from None

    return run


def _guarded_async(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_error(fn.__name__, exc) from None

    return run
