"""A job's token usage on the state store: each step's meter added once, with atomic counters.

Keys: `job:<id>:usage:<kind>:<field>` for the job's totals,
`job:<id>:usage:step:<step>:<kind>:<field>` per step (kind `llm` or `embeddings`) and
`job:<id>:usage:document:<document id>:llm:<field>` per document (LLM calls only: an
embeddings request carries the texts of many documents). Counters
are only ever incremented (Redis INCRBY, a SQLite upsert in one write transaction), so
workers and threads adding at the same time lose nothing. A step delivered twice (its worker
died) counts twice: both deliveries were paid for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from core.llm.usage import FIELDS, KINDS, Meter, metering
from core.ports import StateStore
from pipelines.models import Chunk

T = TypeVar("T")


def _key(job_id: str, *parts: str) -> str:
    return ":".join(("job", job_id, "usage", *parts))


def metered(
    state: StateStore, job_id: str, step: str, work: Callable[[], T], data: object = None
) -> T:
    """Run `work` (a step, on input `data`) with a meter current, then add what it used to the
    job, step and documents, whether it succeeded or not (a failed step's calls were spent
    too). The chunks of `data`, if it has any, tell which document a text is from."""
    chunks = getattr(data, "chunks", None)
    owners = (
        {c.text: c.document_id for c in chunks if isinstance(c, Chunk)}
        if isinstance(chunks, list)
        else {}
    )
    meter = Meter(owners=owners)
    try:
        with metering(meter):
            return work()
    finally:
        add_usage(state, job_id, step, meter)


def add_usage(state: StateStore, job_id: str, step: str, meter: Meter) -> None:
    """Add a meter's counts to the job's totals and to its step's."""
    for kind, counts in meter.totals().items():
        for name, value in counts.items():
            if value:
                state.incr(_key(job_id, kind, name), value)
                state.incr(_key(job_id, "step", step, kind, name), value)
    for document, counts in meter.by_document().items():
        for name, value in counts.items():
            if value:
                state.incr(_key(job_id, "document", document, "llm", name), value)


def job_usage(
    state: StateStore, job_id: str, step: str | None = None, document: str | None = None
) -> dict[str, dict[str, int]]:
    """{kind: {field: count}} of a job, or of one of its steps or documents (whose embeddings
    are not counted apart: zeros); zeros when nothing was used."""
    scope = ("step", step) if step else ("document", document) if document else ()
    keys = [_key(job_id, *scope, kind, name) for kind in KINDS for name in FIELDS]
    values = iter(state.get_many(keys))
    return {kind: {name: int(next(values) or 0) for name in FIELDS} for kind in KINDS}
