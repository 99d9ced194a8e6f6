"""How a failed LLM or embeddings request is sorted (retryable or final) and how long to wait
before the next attempt: the server's Retry-After, else exponential backoff with full jitter.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import openai

# A server asking for a longer pause gets retried after this anyway (and may say no again).
MAX_RETRY_AFTER = 120.0
# 408 timeout, 409 lock conflict, 429 rate limit; all 5xx are retried too.
RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True)
class Failure:
    """What went wrong with one request, and whether another attempt may help."""

    retryable: bool
    kind: str
    status: int | None = None
    retry_after: float | None = None
    detail: str = ""


def classify(err: openai.OpenAIError) -> Failure:
    """Sort an SDK error into retryable (429, 5xx, timeouts, connections) or final."""
    if isinstance(err, openai.APITimeoutError):
        return Failure(True, "timeout", detail="no response in time")
    if isinstance(err, openai.APIConnectionError):
        return Failure(True, "connection error", detail=short(err))
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        # OpenAI answers an exhausted quota with 429 too, but no amount of waiting fixes it.
        quota = getattr(err, "code", None) == "insufficient_quota"
        retryable = (status in RETRYABLE_STATUS or status >= 500) and not quota
        wait = retry_after_seconds(err.response.headers)
        return Failure(retryable, "http error", status, wait, short(err.message))
    return Failure(False, type(err).__name__, detail=short(err))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The pause a server asks for (`retry-after-ms`, or `retry-after` seconds or date)."""
    value = headers.get("retry-after")
    for raw, scale in ((headers.get("retry-after-ms"), 0.001), (value, 1.0)):
        if raw is not None:
            try:
                return max(0.0, float(raw) * scale)
            except ValueError:
                pass  # not a number: maybe an HTTP date
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: fall back to exponential backoff
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff_delay(attempt: int, retry_after: float | None, base: float, cap: float) -> float:
    """Seconds before attempt `attempt + 1`: full jitter, at least what the server asked."""
    jitter = random.uniform(0, min(cap, base * 2 ** (attempt - 1)))
    if retry_after is None:
        return jitter
    # The jitter on top keeps clients told the same Retry-After from returning in one herd.
    return min(retry_after, MAX_RETRY_AFTER) + random.uniform(0, base)


def short(err: object, limit: int = 500) -> str:
    """An error message cut to `limit` characters for exceptions and logs."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
