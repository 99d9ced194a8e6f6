"""A job's token usage on the state store: each step's meter added once, with atomic counters.

Keys: `job:<id>:usage:<kind>:<field>` for the job's totals,
`job:<id>:usage:step:<step>:<kind>:<field>` per step (kind `llm` or `embeddings`) and
`job:<id>:usage:document:<document id>:llm:<field>` per document (LLM calls only: an
embeddings request carries the texts of many documents). Counters
are only ever incremented (Redis INCRBY, a SQLite upsert in one write transaction), so
workers and threads adding at the same time lose nothing. A step delivered twice (its worker
died) counts twice: both deliveries were paid for.

A job with a budget (`Job.budget`) also keeps what its LLM calls committed, in tokens and in
nano-dollars, at `job:<id>:budget:tokens` / `:nano_usd` (`JobBudget`): each request adds its
estimate before it is sent (refused, and the job marked refused, when that goes over the
cap: one INCRBY each, so concurrent workers cannot all slip under it) and the difference to
its reply's usage after. The counters span every run of the job; a resume re-bases them on
the job's recorded usage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from core.llm.usage import FIELDS, KINDS, BudgetExceeded, Meter, llm_micro_usd, metering
from core.models.jobs import Budget, Job
from core.ports import StateStore
from core.sequences import batched
from core.settings import Settings
from pipelines.models import Chunk
from runtime import current_runtime

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
    meter = Meter(owners=owners, guard=job_budget(state, job_id))
    try:
        with metering(meter):
            try:
                return work()
            except BudgetExceeded:
                _wait_answered(meter)
                raise
    finally:
        add_usage(state, job_id, step, meter)


def _wait_answered(meter: Meter) -> None:
    """Let the requests the step sent before one was refused be answered (a step may stop at
    the first refusal, its other requests still running), so their usage is counted."""
    deadline = time.monotonic() + current_runtime().settings.llm_timeout_seconds
    while meter.open_holds() and time.monotonic() < deadline:
        time.sleep(0.05)


def job_budget(state: StateStore, job_id: str) -> JobBudget | None:
    """The budget of the job as its LLM calls reserve against it (None: it has none)."""
    raw = state.get(f"job:{job_id}")
    budget = Job.model_validate_json(raw).budget if raw is not None else None
    if budget is None:
        return None
    return JobBudget(state, job_id, budget, current_runtime().settings)


class JobBudget:
    """A job's budget on the state store: what its LLM calls committed, in atomic counters."""

    def __init__(self, state: StateStore, job_id: str, budget: Budget, settings: Settings):
        self.state, self.job_id, self.budget, self.settings = state, job_id, budget, settings

    def reserve(self, prompt_tokens: int, completion_tokens: int, *, retry: bool = False) -> None:
        """Commit a request's most, or raise BudgetExceeded (committing nothing) when it would
        go over the cap or the job already refused a request. With `retry`, a request that
        only other requests' open reservations keep out is refused with `retry` set, and the
        job does not refuse (their replies may settle below them)."""
        refused = _budget_key(self.job_id, "refused")
        if self.state.get(refused) is not None:
            raise BudgetExceeded(self._message())
        tokens = prompt_tokens + completion_tokens
        nano = nano_usd(prompt_tokens, completion_tokens, 0, self.settings)
        # Held first: a reservation counted in the committed sums is always counted as open.
        held = _budget_key(self.job_id, "held")
        self.state.incr(held, tokens)
        used_tokens = self.state.incr(_budget_key(self.job_id, "tokens"), tokens)
        used_nano = self.state.incr(_budget_key(self.job_id, "nano_usd"), nano)
        if self._over(used_tokens, used_nano):
            # Read after committing: every reservation that took the sums over is in it.
            others = int(self.state.get(held) or 0) - tokens
            self.settle(-prompt_tokens, -completion_tokens, 0, closes=tokens)
            if retry and others > 0:  # their replies may settle below their reservations
                raise BudgetExceeded(self._message(), retry=True)
            self.state.put(refused, "1")
            raise BudgetExceeded(self._message())

    def settle(
        self, prompt_tokens: int, completion_tokens: int, cached_tokens: int, *, closes: int = 0
    ) -> None:
        """Add usage beyond (negative: below) what was committed; close `closes` tokens of
        open reservations."""
        nano = nano_usd(prompt_tokens, completion_tokens, cached_tokens, self.settings)
        amounts = {
            _budget_key(self.job_id, "tokens"): prompt_tokens + completion_tokens,
            _budget_key(self.job_id, "nano_usd"): nano,
            _budget_key(self.job_id, "held"): -closes,
        }
        self.state.incr_many({key: value for key, value in amounts.items() if value})

    def _over(self, tokens: int, nano: int) -> bool:
        budget = self.budget
        return (budget.tokens is not None and tokens > budget.tokens) or (
            budget.usd is not None and nano > round(budget.usd * 1e9)
        )

    def _message(self) -> str:
        return f"job {self.job_id} reached its budget ({describe(self.budget)})"


def nano_usd(prompt: int, completion: int, cached: int, settings: Settings) -> int:
    """What LLM tokens cost in nano-dollars at the settings' prices (linear, so differences
    of tokens price as well)."""
    return round(llm_micro_usd(prompt, completion, cached, settings) * 1000)


def describe(budget: Budget) -> str:
    """A budget in words, e.g. "$0.50 or 20000 tokens"."""
    parts = ([f"${budget.usd:g}"] if budget.usd is not None else []) + (
        [f"{budget.tokens} tokens"] if budget.tokens is not None else []
    )
    return " or ".join(parts)


def rebase_budget(state: StateStore, job_id: str, settings: Settings) -> None:
    """Before a paused job resumes: its committed counters become its recorded LLM usage (no
    request is in flight; a worker that died mid-request left its estimate behind) and the
    refusal is lifted."""
    llm = job_usage(state, job_id)["llm"]
    spent = nano_usd(llm["prompt_tokens"], llm["completion_tokens"], llm["cached_tokens"], settings)
    state.put(_budget_key(job_id, "tokens"), str(llm["prompt_tokens"] + llm["completion_tokens"]))
    state.put(_budget_key(job_id, "nano_usd"), str(spent))
    state.delete(_budget_key(job_id, "refused"), _budget_key(job_id, "held"))


def budget_refused(state: StateStore, job_id: str) -> bool:
    """Whether the job's budget refused a request (until the job resumes)."""
    return state.get(_budget_key(job_id, "refused")) is not None


def _budget_key(job_id: str, name: str) -> str:
    return f"job:{job_id}:budget:{name}"


def add_usage(state: StateStore, job_id: str, step: str, meter: Meter) -> None:
    """Add a meter's counts to the job's totals, its step's and its documents', in one write
    (a round trip on Redis: a step of 32 documents has ~100 counters to add)."""
    amounts: dict[str, int] = {}
    for kind, counts in meter.totals().items():
        for name, value in counts.items():
            if value:
                amounts[_key(job_id, kind, name)] = value
                amounts[_key(job_id, "step", step, kind, name)] = value
    for document, counts in meter.by_document().items():
        for name, value in counts.items():
            if value:
                amounts[_key(job_id, "document", document, "llm", name)] = value
    state.incr_many(amounts)


def job_usage(
    state: StateStore, job_id: str, step: str | None = None, document: str | None = None
) -> dict[str, dict[str, int]]:
    """{kind: {field: count}} of a job, or of one of its steps or documents (whose embeddings
    are not counted apart: zeros); zeros when nothing was used."""
    scope = ("step", step) if step else ("document", document) if document else ()
    keys = [_key(job_id, *scope, kind, name) for kind in KINDS for name in FIELDS]
    values = iter(state.get_many(keys))
    return {kind: {name: int(next(values) or 0) for name in FIELDS} for kind in KINDS}


def jobs_usage(state: StateStore, job_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """{kind: {field: count}} summed over jobs, read in one round trip per 100 jobs."""
    total = {kind: dict.fromkeys(FIELDS, 0) for kind in KINDS}
    fields = [(kind, name) for kind in KINDS for name in FIELDS]
    for part in batched(list(job_ids), 100):
        keys = [_key(job_id, kind, name) for job_id in part for kind, name in fields]
        for (kind, name), value in zip(fields * len(part), state.get_many(keys), strict=True):
            total[kind][name] += int(value or 0)
    return total
