"""One delivery of a batch's task: which step of which batch, in which generation, and
whether it must do nothing (the batch moved on without it)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from core.models.jobs import Claim
from pipelines.base import step_types
from pipelines.definitions import STEPS, get_pipeline
from pipelines.models import WriteReport
from workers.celery_app import FINISH, TASK_STEPS
from workers.jobs import JobTracker

# The steps that take a write's report, read once from the registry's annotations.
AFTER_WRITE = frozenset(
    name for name, step in STEPS.items() if issubclass(step_types(step)[0], WriteReport)
)


@dataclass(frozen=True)
class Delivery:
    """One delivery's work: a step of a batch of a job, in one generation of the batch."""

    in_key: str | None
    job_id: str
    pipeline: str
    step: str
    batch: int
    gen: int
    dataset: str = ""

    @classmethod
    def of_message(cls, task: str, kwargs: dict[str, Any]) -> Delivery:
        """The delivery a message of `task` with these keyword arguments stands for (its input
        key unknown); a ValueError for a task that runs no step."""
        if task not in TASK_STEPS:
            raise ValueError(f"{task!r} is not a cogmill step task")
        return cls(
            None,
            kwargs["job_id"],
            kwargs.get("pipeline", ""),
            TASK_STEPS[task],
            kwargs["batch"],
            kwargs.get("gen", 0),
            kwargs.get("dataset", ""),
        )

    @property
    def first(self) -> bool:
        """Whether this is the first step of its batch (where the batch takes its tenant's
        slot, workers/fairness.py)."""
        return get_pipeline(self.pipeline).step_names[0] == self.step

    @property
    def after_write(self) -> bool:
        """Whether the batch's data is stored when this step runs (its input is the write's
        report): a cancel no longer stops it, so the batch is recorded as written."""
        return self.step in AFTER_WRITE

    def claim(
        self, worker: str, state: Literal["running", "done"], at: float | None = None
    ) -> Claim:
        """This delivery's claim on its batch, by `worker`."""
        at = time.time() if at is None else at
        return Claim(step=self.step, worker=worker, gen=self.gen, state=state, at=at)

    def stale(self, jobs: JobTracker) -> bool:
        """Whether this delivery must do nothing: the batch is recorded, re-published in a
        later generation, or already past this step (a message redelivered after its step
        ended and the chain moved on, e.g. its worker died before acknowledging it)."""
        recorded, gen, claim = jobs.position(self.job_id, self.batch)
        if recorded or gen > self.gen:
            return True
        if claim is None or claim.gen != self.gen or self.step == FINISH:
            return False
        order = [*get_pipeline(self.pipeline).step_names, FINISH]
        if claim.step not in order:
            return False
        passed = order.index(claim.step) - order.index(self.step)
        return passed > 0 or (passed == 0 and claim.state in ("done", "handed_on"))
