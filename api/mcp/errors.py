"""Exceptions of the use cases as MCP tool errors, through the one mapping (api/errors.py).

A tool error comes back to the model as a result with `isError` set and one line of text saying
what to do, with hints naming tools and resources. Server-side failures (a store down, a
missing model) say only what failed, as the HTTP API's 5xx bodies do; anything unforeseen is
logged with its traceback and reported as a bug, never as a stack trace in the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from api.errors import answer

P = ParamSpec("P")
T = TypeVar("T")


def tool_error(tool: str, exc: Exception) -> ToolError:
    """The tool error a use case's exception becomes."""
    return ToolError(answer(exc, "mcp", f"tool={tool}").message)


def guarded(fn: Callable[P, T]) -> Callable[P, T]:
    """A tool whose exceptions come back as tool errors with safe messages."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:
            raise tool_error(fn.__name__, exc) from None

    return run
