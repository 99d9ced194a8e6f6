"""Structured (JSON, pydantic-validated) chat completions from any OpenAI-compatible endpoint.

The SDK's own retries are off: this client retries, so that the limiter is awaited before
every attempt and one budget (`max_attempts`) covers transport errors and invalid replies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

import httpx
import openai
import openai.resources  # noqa: F401  (the SDK imports this lazily, ~1 s inside the first call)
from pydantic import BaseModel, ValidationError

from core.llm import aio, deferral, outage
from core.llm import usage as accounting
from core.llm.cache import LLMCache, cache_key
from core.llm.errors import LLMError
from core.llm.retries import Failure, backoff_delay, classify, short
from core.llm.schemas import mentions_schema, repair_messages, response_format, schema_of
from core.llm.usage import LLMStats
from core.ports import RateLimiter, StoreError

log = logging.getLogger("cogmill.llm")
Model = TypeVar("Model", bound=BaseModel)
# Local servers (vLLM, Ollama, llama.cpp) need no key, but the SDK refuses an empty one.
NO_API_KEY = "not-needed"


class LLMClient:
    """Asks a chat model for JSON that validates against a pydantic schema; retries, caches."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        *,
        timeout: float = 60.0,
        max_attempts: int = 6,
        limiter: RateLimiter | None = None,
        cache: LLMCache | None = None,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        max_in_flight: int = 16,
    ) -> None:
        if not base_url or not model:
            raise ValueError(f"base_url and model are required, got {base_url!r}, {model!r}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = f"{self.base_url}/chat/completions"
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.limiter = limiter
        self.cache = cache
        self.backoff = (backoff_base, backoff_cap)
        self.stats = LLMStats()
        self.max_in_flight = max_in_flight
        self._api_key = api_key or NO_API_KEY
        # Cleared for good when the server rejects `json_schema`; then `json_object` is used.
        self._json_schema = True
        # One SDK client per event loop: httpx connections cannot move between loops (the
        # pipeline's calls all run on one loop per process; tests may run loops of their own).
        self._sdks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI]
        self._sdks = weakref.WeakKeyDictionary()
        self._sdks_lock = threading.Lock()
        # Requests in flight, at most max_in_flight per event loop: on the process's LLM loop
        # (core/llm/aio.py) that is a cap shared by every batch the process works on.
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._gates = weakref.WeakKeyDictionary()

    async def structured(self, messages: Sequence[dict[str, Any]], schema: type[Model]) -> Model:
        """The model's reply parsed as `schema`, from the cache if possible. Raises LLMError."""
        schema_json = schema_of(schema)
        key = cache_key(self.model, messages, schema_json) if self.cache else None
        if key is not None and (hit := await self._cached(key, schema)) is not None:
            return hit
        if key is not None and deferral.defer(key, self.model, messages, schema, schema_json):
            raise LLMError(f"{self.endpoint}: {deferral.DEFERRED}")  # COGMILL_LLM_MODE=batch
        try:
            result = await self._complete(list(messages), schema, schema_json)
        except LLMError:
            self.stats.add(failures=1)
            raise
        if key is not None:
            await self._store(key, result.model_dump_json())
        return result

    async def aclose(self) -> None:
        """Close the HTTP connections opened from the running event loop."""
        with self._sdks_lock:
            sdk = self._sdks.pop(asyncio.get_running_loop(), None)
        if sdk is not None:
            await sdk.close()

    async def _complete(
        self, messages: list[dict[str, Any]], schema: type[Model], schema_json: dict[str, Any]
    ) -> Model:
        """Attempts until a valid reply; an invalid reply is sent back once per attempt."""
        request, last, unanswered = messages, "no attempt made", False
        for attempt in range(1, self.max_attempts + 1):
            try:
                content = await self._send(request, schema, schema_json)
            except openai.OpenAIError as err:
                failure = classify(err)
                if not failure.retryable:
                    raise LLMError(self._message(failure, attempt, retryable=False)) from err
                last, unanswered = self._message(failure, attempt), True
                await self._pause(attempt, failure)
                continue
            try:
                return schema.model_validate_json(content)
            except ValidationError as err:
                # Ask for a repair of this reply, not a fresh answer: the model sees its error.
                self.stats.add(repairs=1)
                last = f"{self.endpoint}: invalid reply after {attempt} attempt(s): {short(err)}"
                unanswered = False
                request = repair_messages(messages, content, err)
        if unanswered:
            outage.gave_up()
        raise LLMError(f"{last} (gave up after {self.max_attempts} attempts)")

    async def _send(
        self, messages: list[dict[str, Any]], schema: type[BaseModel], schema_json: dict[str, Any]
    ) -> str:
        """One request after the limiter allows it; the reply text ("" if none). Raises
        BudgetExceeded, sending nothing, when the job's budget cannot cover it."""
        accounting.reserve(messages, schema_json, self.stats.expected_completion_tokens())
        if self.limiter is not None:
            await self.limiter.acquire(self._estimate(messages, schema_json))
        self.stats.add(requests=1)
        json_schema = self._json_schema
        sent = self._with_format(messages, schema_json, json_schema)
        fmt = response_format(schema, schema_json, json_schema)
        try:
            # Plain JSON posted, the reply parsed with json: the SDK's typed `create` checks the
            # messages against its TypedDicts (0.5 ms a call) and builds response models.
            async with self._gate():
                raw = await self._sdk().post(
                    "/chat/completions",
                    body={"model": self.model, "messages": sent, "response_format": fmt},
                    cast_to=httpx.Response,
                    options={"timeout": self.timeout},
                )
        except (openai.BadRequestError, openai.UnprocessableEntityError) as err:
            if not (json_schema and mentions_schema(err)):
                raise
            self._json_schema = False
            self.stats.add(fallbacks=1)
            log.warning("llm_json_schema_rejected endpoint=%s fallback=json_object", self.endpoint)
            return await self._send(messages, schema, schema_json)
        try:
            body = json.loads(raw.content)
            self._record_usage(body.get("usage"))
            choices = body.get("choices") or [{}]
            content = (choices[0].get("message") or {}).get("content") or ""
        except (ValueError, AttributeError):  # not JSON, or JSON of another shape: an invalid
            body, content = {}, raw.text  # reply, which is sent back for repair like any other
        usage = body.get("usage") if isinstance(body, dict) else None
        accounting.record(
            "llm", usage, prompt=accounting.prompt_text(sent, fmt), completion=content
        )
        return content

    def _with_format(
        self, messages: list[dict[str, Any]], schema_json: dict[str, Any], json_schema: bool
    ) -> list[dict[str, Any]]:
        """Messages as sent: in `json_object` mode the schema must be spelled out in a prompt."""
        if json_schema:
            return messages
        hint = "Reply with one JSON object that follows this JSON schema:\n" + json.dumps(
            schema_json
        )
        # Into the leading system message: some chat templates allow only one, and only first.
        if messages and messages[0].get("role") == "system":
            first = {**messages[0], "content": f"{messages[0]['content']}\n\n{hint}"}
            return [first, *messages[1:]]
        return [{"role": "system", "content": hint}, *messages]

    async def _pause(self, attempt: int, failure: Failure) -> None:
        """Sleep before the next attempt (none after the last)."""
        if attempt >= self.max_attempts:
            return
        delay = backoff_delay(attempt, failure.retry_after, *self.backoff)
        self.stats.add(retries=1, rate_limited=int(failure.status == 429))
        log.warning(
            "llm_retry endpoint=%s status=%s attempt=%d delay=%.2f",
            self.endpoint,
            failure.status or failure.kind,
            attempt,
            delay,
        )
        await asyncio.sleep(delay)

    def _message(self, failure: Failure, attempt: int, *, retryable: bool = True) -> str:
        status = f"HTTP {failure.status}" if failure.status else failure.kind
        tail = "" if retryable else " (not retryable)"
        return f"{self.endpoint}: {status} on attempt {attempt}: {failure.detail}{tail}"

    def _gate(self) -> asyncio.Semaphore:
        """The in-flight cap of the running event loop."""
        loop = asyncio.get_running_loop()
        with self._sdks_lock:
            return self._gates.setdefault(loop, asyncio.Semaphore(self.max_in_flight))

    def _sdk(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop, created on first use."""
        loop = asyncio.get_running_loop()
        with self._sdks_lock:
            sdk = self._sdks.get(loop)
            if sdk is None:
                sdk = openai.AsyncOpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key,
                    timeout=self.timeout,
                    max_retries=0,  # retries happen here, under the limiter
                    http_client=aio.http_client(self.timeout),
                )
                self._sdks[loop] = sdk
            return sdk

    def _estimate(self, messages: list[dict[str, Any]], schema_json: dict[str, Any]) -> int:
        """Tokens this call will likely count against a tokens/minute limit."""
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        chars += len(str(schema_json))  # close enough to its JSON length, and cheaper
        # ~4 characters per token in English; corrected by the replies seen so far.
        return chars // 4 + self.stats.expected_completion_tokens()

    def _record_usage(self, usage: dict[str, Any] | None) -> None:
        if usage:
            self.stats.add(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
                _answers=1,
            )

    async def _cached(self, key: str, schema: type[Model]) -> Model | None:
        """A cached reply; a broken cache is logged and treated as a miss."""
        assert self.cache is not None
        try:
            raw = await asyncio.to_thread(self.cache.get, key)
        except StoreError as err:
            log.warning("llm_cache_unavailable op=get error=%s", err)
            return None
        if raw is None:
            return None
        try:
            result = schema.model_validate_json(raw)
        except ValidationError:
            return None  # written under an older schema: answer again
        self.stats.add(cache_hits=1)
        accounting.cache_hit("llm")
        return result

    async def _store(self, key: str, raw: str) -> None:
        assert self.cache is not None
        try:
            await asyncio.to_thread(self.cache.put, key, raw)
        except StoreError as err:
            log.warning("llm_cache_unavailable op=put error=%s", err)
