"""Token accounting: what the LLM and embeddings calls of one piece of work used.

The step shell (workers/tasks.py) opens a `Meter` around a step with `metering(meter)`; the
LLM client and the remote embedder add each reply's `usage` to `current_meter()`. The meter
lives in a context variable: each thread (the embedded mode runs steps on threads) sees only
its own, and the LLM loop's tasks inherit the meter of the thread that submitted them
(`asyncio.run_coroutine_threadsafe` and `asyncio.gather` copy the caller's context). A meter
only sums in memory; whoever opened it stores the totals once (atomic counters, so workers
never lose each other's increments).

A meter may carry a job's budget (`Spending`): before each LLM request the client calls
`reserve`, which sets the request's estimated tokens aside against the budget (or raises
BudgetExceeded, and the request is not sent); the reply's usage then settles the estimate to
what was used. Cache hits never reach the endpoint and are free.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from core.embeddings.tokenizer import count_tokens as word_pieces
from core.errors import CogmillError
from core.settings import Settings

# Completion tokens assumed per call before any usage has been reported.
DEFAULT_COMPLETION_TOKENS = 256
KINDS = ("llm", "embeddings")
FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_hits")


@dataclass
class LLMStats:
    """Counters for logs and tests; safe to update from several threads."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    rate_limited: int = 0  # the retries answered 429
    repairs: int = 0
    fallbacks: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _answers: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add to named counters atomically."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        """The public counters as a dict."""
        with self._lock:
            return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def expected_completion_tokens(self) -> int:
        """The mean completion size so far, for the next call's token estimate."""
        with self._lock:
            if not self._answers:
                return DEFAULT_COMPLETION_TOKENS
            return self.completion_tokens // self._answers


@dataclass
class Usage:
    """Token counts of one kind of call (LLM or embeddings)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_hits: int = 0  # calls saved by the response cache

    def counts(self) -> dict[str, int]:
        return asdict(self)


class BudgetExceeded(CogmillError, RuntimeError):
    """The job's budget cannot cover the next LLM call, which is not made. Not an LLMError on
    purpose: no step may take it for one call's failure; the step stops and its batch waits
    for `jobs resume`."""

    code, status = "budget_exceeded", 402


class Spending(Protocol):
    """A job's budget as its LLM calls see it (workers/usage.py keeps it in the state store)."""

    def reserve(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Set a call's estimated tokens aside; BudgetExceeded (nothing set aside) when they
        would take the job over its budget. Raises StoreError."""

    def settle(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> None:
        """Add what calls used beyond (negative: below) what was set aside for them."""


@dataclass
class Hold:
    """The tokens set aside for one LLM request until its reply's usage is known."""

    prompt_tokens: int
    completion_tokens: int
    open: bool = True


@dataclass
class Meter:
    """Sums the usage of the calls made while it is current; safe to update from threads."""

    usage: dict[str, Usage] = field(default_factory=lambda: {kind: Usage() for kind in KINDS})
    # The document each text belongs to (a step's chunks), for the LLM calls made about it.
    owners: Mapping[str, str] = field(default_factory=dict)
    # LLM usage per document, from calls made under `about_document` / `about_text`.
    documents: dict[str, Usage] = field(default_factory=dict)
    # The job's budget, which every LLM request of the work must reserve against (None: no cap).
    guard: Spending | None = None
    _holds: list[Hold] = field(default_factory=list, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def hold(self, prompt_tokens: int, completion_tokens: int) -> Hold:
        """Reserve one request's estimate against the guard (BudgetExceeded: refused)."""
        assert self.guard is not None
        self.guard.reserve(prompt_tokens, completion_tokens)
        hold = Hold(prompt_tokens, completion_tokens)
        with self._lock:
            self._holds.append(hold)
        return hold

    def settle(self, hold: Hold | None, prompt: int, completion: int, cached: int) -> None:
        """A request answered with this usage: the guard gets the difference to its hold (the
        whole usage when the hold was released meanwhile, or there was none)."""
        if self.guard is None:
            return
        with self._lock:
            if hold is not None and hold.open:
                hold.open = False
                self._holds.remove(hold)
                prompt -= hold.prompt_tokens
                completion -= hold.completion_tokens
        self.guard.settle(prompt, completion, cached)

    def release(self, holds: list[Hold] | None = None) -> None:
        """Give back the estimate of requests that got no answer (default: every open hold)."""
        if self.guard is None:
            return
        with self._lock:
            gone = [h for h in (self._holds if holds is None else holds) if h.open]
            for hold in gone:
                hold.open = False
                self._holds.remove(hold)
        if gone:
            prompt = sum(h.prompt_tokens for h in gone)
            self.guard.settle(-prompt, -sum(h.completion_tokens for h in gone), 0)

    def open_holds(self) -> int:
        """Requests sent under this meter and not answered (or given back) yet."""
        with self._lock:
            return len(self._holds)

    def add(self, kind: str, **counts: int) -> None:
        """Add to the named counters of `kind` ("llm" or "embeddings"), and to the current
        document's LLM usage when a call is about one."""
        document = _document.get() if kind == "llm" else None
        with self._lock:
            targets = [self.usage[kind]]
            if document is not None:
                targets.append(self.documents.setdefault(document, Usage()))
            for usage in targets:
                for name, value in counts.items():
                    setattr(usage, name, getattr(usage, name) + int(value))

    def by_document(self) -> dict[str, dict[str, int]]:
        """{document id: LLM {field: count}}, a copy."""
        with self._lock:
            return {doc: usage.counts() for doc, usage in self.documents.items()}

    def totals(self) -> dict[str, dict[str, int]]:
        """{kind: {field: count}}, a copy."""
        with self._lock:
            return {kind: usage.counts() for kind, usage in self.usage.items()}


_current: ContextVar[Meter | None] = ContextVar("cogmill_meter", default=None)
_document: ContextVar[str | None] = ContextVar("cogmill_document", default=None)
# The hold of the request this context (one asyncio task per call) is waiting on.
_hold: ContextVar[Hold | None] = ContextVar("cogmill_hold", default=None)


def about_document(document_id: str) -> None:
    """The LLM calls made from here on in this context (call it first thing in the asyncio
    task of one document's call: a task's context is its own) are about this document."""
    _document.set(document_id)


def about_text(text: str) -> None:
    """`about_document` for the document the current meter knows `text` (a chunk) is from."""
    meter = current_meter()
    if meter is not None and (owner := meter.owners.get(text)) is not None:
        _document.set(owner)


def current_meter() -> Meter | None:
    """The meter of the work running in this context, if any."""
    return _current.get()


@contextmanager
def metering(meter: Meter) -> Iterator[Meter]:
    """Make `meter` current for the block (in this thread and the tasks it starts)."""
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)
        meter.release()  # requests that never got an answer spent nothing


def reserve(
    messages: Sequence[dict[str, Any]], schema: dict[str, Any], completion_tokens: int
) -> None:
    """Before an LLM request: set its estimated tokens (the prompt's ~4 characters a token,
    and `completion_tokens`) aside against the current meter's budget, if it has one. Raises
    BudgetExceeded when the budget cannot cover them: the request must not be sent."""
    meter = current_meter()
    if meter is None or meter.guard is None:
        return
    previous = _hold.get()
    if previous is not None:  # this context's previous attempt got no answer
        meter.release([previous])
    _hold.set(None)
    chars = sum(len(str(m.get("content", ""))) for m in messages) + len(json.dumps(schema))
    _hold.set(meter.hold(chars // 4, completion_tokens))


def record(kind: str, usage: Mapping[str, Any] | None, *, prompt: str, completion: str) -> None:
    """Add one answered call to the current meter: the reply's `usage` when the endpoint sent
    one, else tokens counted with the local tokenizer (`prompt`/`completion`: the texts sent
    and received)."""
    meter = current_meter()
    if meter is None:
        return
    if usage:
        details = usage.get("prompt_tokens_details") or {}
        used = (
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            int(details.get("cached_tokens") or 0),
        )
    else:
        counted = count_tokens([prompt, completion])
        used = (counted[0], counted[1], 0)
    meter.add(
        kind, calls=1, prompt_tokens=used[0], completion_tokens=used[1], cached_tokens=used[2]
    )
    if kind == "llm" and meter.guard is not None:
        meter.settle(_hold.get(), *used)
        _hold.set(None)


def add(kind: str, **counts: int) -> None:
    """Add counts to the current meter, if any (e.g. the local embedder's calls and tokens)."""
    meter = current_meter()
    if meter is not None:
        meter.add(kind, **counts)


def cache_hit(kind: str = "llm") -> None:
    """A call the response cache saved."""
    meter = current_meter()
    if meter is not None:
        meter.add(kind, cache_hits=1)


def count_tokens(texts: list[str]) -> list[int]:
    """Tokens per text with the local word-piece tokenizer (close to, not exactly, a remote
    model's); ~4 characters a token when the tokenizer is not installed."""
    try:
        return word_pieces(texts)
    except FileNotFoundError:
        return [len(text) // 4 for text in texts]


def cost_usd(kind: str, counts: Mapping[str, int], settings: Settings) -> float:
    """What `counts` of `kind` cost at the settings' prices (USD per million tokens)."""
    prompt, cached = counts.get("prompt_tokens", 0), counts.get("cached_tokens", 0)
    if kind == "embeddings":
        return round(prompt * settings.embedding_price_per_mtok / 1e6, 6)
    completion = counts.get("completion_tokens", 0)
    return round(llm_micro_usd(prompt, completion, cached, settings) / 1e6, 6)


def llm_micro_usd(prompt: int, completion: int, cached: int, settings: Settings) -> float:
    """What LLM tokens cost in millionths of a dollar (USD per million tokens x tokens):
    cached prompt tokens at the cached-input price, the rest at the input price."""
    return (
        (prompt - cached) * settings.llm_price_input_per_mtok
        + cached * settings.llm_price_cached_input_per_mtok
        + completion * settings.llm_price_output_per_mtok
    )


def priced(totals: Mapping[str, Mapping[str, int]], settings: Settings) -> dict[str, UsageTotals]:
    """{kind: UsageTotals} for every kind: the counts and their cost."""
    out: dict[str, UsageTotals] = {}
    for kind in KINDS:
        counts = {name: int(totals.get(kind, {}).get(name, 0)) for name in FIELDS}
        out[kind] = UsageTotals(**counts, cost_usd=cost_usd(kind, counts, settings))
    return out


def prompt_text(messages: Sequence[dict[str, Any]], fmt: dict[str, Any]) -> str:
    """The text a request sends the model (its messages, and a JSON schema it is given), for
    counting its tokens where the endpoint reports no usage."""
    parts = [str(m.get("content", "")) for m in messages]
    if schema := (fmt.get("json_schema") or {}).get("schema"):
        parts.append(json.dumps(schema))
    return "\n".join(parts)


class UsageTotals(BaseModel):
    """Token usage of one kind of call, priced: what a job record shows."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    cache_hits: int = Field(default=0, description="calls the response cache saved")
