"""Steps and pipelines. A step is a class with one typed `run`; a pipeline checks its chain.

A step describes itself: its `name`, the `queue` its task runs on, and a `build` classmethod
that makes an instance from a process's services (`StepServices`, which workers' Runtime
satisfies) and the job (`StepContext`). Steps know nothing about Celery: `workers/` registers
one task per step, loads its input by id, calls `run`, and stores the output.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from core.entity_keys import EntityKeyIndex
from core.errors import CogmillError
from core.ports import (
    BlobStore,
    Embedder,
    Extractor,
    GraphStore,
    LexicalIndex,
    StateStore,
    VectorStore,
)
from core.settings import Settings

if TYPE_CHECKING:
    from core.llm.client import LLMClient

StepQueue = Literal["ingest", "llm"]
INGEST: StepQueue = "ingest"  # parsing, chunking, writes
LLM: StepQueue = "llm"  # steps that wait on LLM calls, scaled and rate-limited on their own
QUEUES: tuple[StepQueue, ...] = (INGEST, LLM)


class PipelineStepError(CogmillError, RuntimeError):
    """A step failed for a whole batch (per-document problems are reported, not raised)."""

    code = "step_failed"

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step


class StepServices(Protocol):
    """What a step may be built from: one process's settings, stores and models (opened
    lazily; `runtime.Runtime` is the one implementation)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def graph(self) -> GraphStore: ...
    @property
    def vectors(self) -> VectorStore: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def state(self) -> StateStore: ...
    @property
    def blobs(self) -> BlobStore: ...
    @property
    def lexical(self) -> LexicalIndex: ...
    @property
    def entity_keys(self) -> EntityKeyIndex: ...
    @property
    def extractor(self) -> Extractor: ...
    @property
    def llm(self) -> LLMClient | None: ...


@dataclass(frozen=True)
class StepContext:
    """What a job tells the steps it builds: its pipeline's name and version, and the job's
    options (`cognify --graph-model`, `--ontology`; see `Job.options`)."""

    pipeline: str
    version: str
    options: Mapping[str, Any] = field(default_factory=dict)


class Step(Protocol):
    name: ClassVar[str]
    queue: ClassVar[StepQueue]

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> Step: ...

    def run(self, data: Any) -> BaseModel: ...


def check_step(step: Any) -> None:
    """Raise a TypeError naming what a step class lacks: a `name`, a `queue` among `QUEUES`,
    a typed `run`, or a `build(services, context)` classmethod."""
    label = getattr(step, "__name__", repr(step))
    name = getattr(step, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"step {label} must declare `name`, a Python identifier; got {name!r}")
    if getattr(step, "queue", None) not in QUEUES:
        raise TypeError(
            f"step {label} must declare `queue` as one of {', '.join(QUEUES)}; "
            f"got {getattr(step, 'queue', None)!r}"
        )
    build = inspect.getattr_static(step, "build", None)
    if not isinstance(build, classmethod) or len(inspect.signature(step.build).parameters) != 2:
        raise TypeError(
            f"step {label} must define `build(cls, services, context)` as a classmethod that "
            "makes an instance from a process's services and the job"
        )
    step_types(step)


def step_types(step: Any) -> tuple[type[BaseModel], type[BaseModel]]:
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
        for step in steps:
            check_step(step)
        names = [step.name for step in steps]
        if len(set(names)) != len(names):
            raise ValueError(f"pipeline {name!r} names a step twice: {names}")
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

    def build_step(
        self, name: str, services: StepServices, options: Mapping[str, Any] | None = None
    ) -> Step:
        """An instance of the named step, built from a process's services and a job's options;
        a ValueError names the pipeline's steps when it has no such step."""
        for step in self.steps:
            if step.name == name:
                context = StepContext(self.name, self.version, options or {})
                built: Step = step.build(services, context)
                return built
        raise ValueError(
            f"pipeline {self.name!r} has no step {name!r}; its steps: {', '.join(self.step_names)}"
        )
