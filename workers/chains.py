"""The chain of one batch: each step's own task on the step's queue, then `finish_batch`.

Chains are published by task name (`cogmill.<step>`, see workers/celery_app.py), so planning
(workers/orchestration.py) and the sweeper need not import the task shells (workers/tasks.py),
which record batches through the orchestration. Every task of a chain carries the job,
dataset, pipeline, batch, the batch's document count and its generation as keyword
arguments: Flower and `celery inspect` show them beside the step's name.
"""

from __future__ import annotations

from typing import Any

from celery import Signature, chain

from pipelines.definitions import get_pipeline
from pipelines.models import DocumentBatch
from workers.celery_app import FINISH, PRIORITY_LEVELS, TASK_QUEUES, app, task_name
from workers.job_keys import batch_input_key


def step_priority(position: int) -> int:
    """A later step is served first (0 is first): a batch that got its LLM answers moves on to
    its writes instead of waiting behind every other batch's first steps, so writing overlaps
    the LLM calls still running, and a job drains steadily instead of all at its end."""
    return max(0, PRIORITY_LEVELS - 1 - position)


def task_kwargs(job_id: str, batch: int, source: DocumentBatch, gen: int = 0) -> dict[str, Any]:
    """The keyword arguments of every task of a batch's chain (`source` is its input)."""
    return {
        "job_id": job_id,
        "dataset": source.dataset,
        "pipeline": source.pipeline,
        "batch": batch,
        "documents": len(source.documents),
        "gen": gen,
    }


def batch_chain(
    job_id: str,
    batch: int,
    source: DocumentBatch,
    steps: list[str] | None = None,
    in_key: str | None = None,
    gen: int = 0,
) -> Signature:
    """The chain of one batch: each of `steps` (default: its pipeline's) as its own task on
    its queue, then `finish_batch`.

    `in_key` is the first step's input (default: the batch's planned input); the sweeper
    resumes a batch with the steps left after its last stored output, in a new generation.
    """
    order = get_pipeline(source.pipeline).step_names
    kwargs = task_kwargs(job_id, batch, source, gen)
    names = [*(order if steps is None else steps), FINISH]
    signatures = [
        app.signature(
            task_name(name),
            kwargs=dict(kwargs),  # one dict each: Celery may update a signature in place
            queue=TASK_QUEUES[task_name(name)],
            priority=step_priority(order.index(name) if name in order else len(order)),
        )
        for name in names
    ]
    signatures[0].args = (in_key or batch_input_key(job_id, batch),)
    return chain(*signatures)
