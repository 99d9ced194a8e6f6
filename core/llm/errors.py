"""LLMError: how every LLM call reports an endpoint that failed for good (core/errors.py)."""

from __future__ import annotations

from core.errors import UpstreamFailed


class LLMError(UpstreamFailed):
    """An LLM endpoint failed for good: after all attempts, or with a non-retryable error."""

    code = "llm_failed"
    public_message = "the LLM endpoint failed; retry later"
