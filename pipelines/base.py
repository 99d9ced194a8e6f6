"""Steps and pipelines. A step is a class with one typed `run`; a pipeline checks its chain.

Steps know nothing about Celery: `workers/` loads a step's input by id, calls `run`, and
stores the output.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel


class PipelineStepError(RuntimeError):
    """A step failed for a whole batch (per-document problems are reported, not raised)."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step


class Step(Protocol):
    name: ClassVar[str]

    def run(self, data: Any) -> BaseModel: ...


def step_types(step: Any) -> tuple[type, type]:
    """The input and output models of a step, read from the annotations of its `run`."""
    hints = typing.get_type_hints(step.run)
    params = [name for name in hints if name != "return"]
    if len(params) != 1 or "return" not in hints:
        raise TypeError(
            f"{step.__name__}.run must take one annotated argument and annotate its return"
        )
    return hints[params[0]], hints["return"]


class Pipeline:
    """An ordered list of step classes whose input/output types are checked when built."""

    def __init__(self, name: str, version: str, steps: Sequence[Any]) -> None:
        if not steps:
            raise ValueError(f"pipeline {name!r} has no steps")
        for before, after in zip(steps, steps[1:], strict=False):
            produced, consumed = step_types(before)[1], step_types(after)[0]
            if not issubclass(produced, consumed):
                raise TypeError(
                    f"pipeline {name!r}: {before.__name__} returns {produced.__name__} but "
                    f"{after.__name__} takes {consumed.__name__}"
                )
        self.name = name
        self.version = version
        self.steps = list(steps)

    @property
    def input_type(self) -> type:
        return step_types(self.steps[0])[0]

    @property
    def step_names(self) -> list[str]:
        return [step.name for step in self.steps]
