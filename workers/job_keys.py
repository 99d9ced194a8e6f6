"""Where a job's records and artifacts live in the state store: `job:<id>:...` keys."""

from __future__ import annotations


def job_key(job_id: str, *parts: str) -> str:
    """The key of a job's record (no parts) or of one of its parts."""
    return ":".join(("job", job_id, *parts))


def batch_input_key(job_id: str, batch: int) -> str:
    """Where a planned batch's input (its DocumentBatch) is stored."""
    return job_key(job_id, "artifact", str(batch), "input")


def step_output_key(job_id: str, batch: int, step: str) -> str:
    """Where a step stores its output for a batch (`JobTracker.put_artifact`)."""
    return job_key(job_id, "artifact", str(batch), step)
