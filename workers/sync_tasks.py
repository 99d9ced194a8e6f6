"""The Celery task of a sync's source phase, `cogmill.sync` (workers/sync.py holds its body).

Acknowledged late like every step: a worker killed in the middle leaves the message to be
redelivered, and the sweeper publishes the phase again sooner (its lease runs out); the
generation in the message makes whichever delivery is older do nothing.
"""

from __future__ import annotations

from core.ports import StoreError
from runtime import current_runtime
from workers.celery_app import app
from workers.sync import TASK, run_sync


@app.task(
    name=TASK,
    autoretry_for=(StoreError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=8,
)
def sync(job_id: str, dataset: str, gen: int = 0) -> None:
    """Read the source of sync job `job_id` on `dataset`, mirror it into the dataset and plan
    the cognify of what changed (generation `gen` of the phase)."""
    run_sync(current_runtime(), job_id, gen)
