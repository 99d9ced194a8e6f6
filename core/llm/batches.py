"""The client side of the OpenAI Files + Batches API: chat requests submitted as one JSONL
file, the batch's state, its answers read back (workers/llm_batches/ drives it).

A request's `custom_id` is its LLM cache key, so an answer lands in the cache where the
step's next run looks for it. Answers are checked here as far as this side can (a 200 line,
a chat reply whose content is a JSON object); the step's run validates them against its
schema when it reads the cache, and asks again through the normal path when one does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import openai

from core.errors import UpstreamFailed
from core.llm.client import NO_API_KEY
from core.llm.deferral import Deferred
from core.llm.retries import short
from core.llm.schemas import response_format

ENDPOINT: Final = "/v1/chat/completions"
COMPLETION_WINDOW: Final = "24h"
# Batch states after which nothing more will be answered.
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
_LIST_PAGE = 100


class BatchAPIError(UpstreamFailed):
    """The Files or Batches endpoint refused a request or could not be reached; `refused`:
    it answered a 4xx, so the request created nothing."""

    code = "batch_api_failed"
    public_message = "the LLM's Batch API failed; retry later"

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class BatchState:
    """What the endpoint says about one batch."""

    id: str
    status: str
    input_file_id: str
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True)
class Answer:
    """One line of a batch's output: the reply's JSON content and usage, or why there is none."""

    custom_id: str
    content: str | None
    usage: Mapping[str, Any]
    error: str = ""


def jsonl(requests: Sequence[Deferred]) -> bytes:
    """The batch input file: one chat request per line, its cache key as custom_id."""
    lines = []
    for request in requests:
        fmt = response_format(request.schema, request.schema_json, True)
        body = {"model": request.model, "messages": request.messages, "response_format": fmt}
        line = {"custom_id": request.key, "method": "POST", "url": ENDPOINT, "body": body}
        lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode("utf-8")


class BatchAPI:
    """Files + Batches calls on an OpenAI-compatible endpoint (synchronous: a poller thread
    and a step's shell call it)."""

    def __init__(self, base_url: str, api_key: str = "", *, timeout: float = 60.0) -> None:
        if not base_url:
            raise ValueError("the Batch API needs COGMILL_LLM_BASE_URL")
        self._sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key or NO_API_KEY, timeout=timeout, max_retries=3
        )

    def close(self) -> None:
        self._sdk.close()

    def submit(self, requests: Sequence[Deferred], metadata: dict[str, str]) -> BatchState:
        """Upload the requests and start a batch on them tagged with `metadata`. Raises
        BatchAPIError."""
        try:
            uploaded = self._sdk.files.create(
                file=("requests.jsonl", jsonl(requests), "application/jsonl"), purpose="batch"
            )
            created = self._sdk.batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata=metadata,
            )
        except openai.OpenAIError as err:
            status = getattr(err, "status_code", None)
            refused = isinstance(status, int) and 400 <= status < 500
            raise BatchAPIError(f"batch submission failed: {short(err)}", refused=refused) from err
        return _state(created)

    def find(self, key: str, value: str, since: float = 0.0) -> BatchState | None:
        """The newest batch whose metadata has `key` = `value` (one submitted by a worker that
        died before it recorded the batch's id), among those created since `since` (a Unix
        time: the list comes newest first), or None. Raises BatchAPIError."""
        try:
            for batch in self._sdk.batches.list(limit=_LIST_PAGE):
                if (batch.metadata or {}).get(key) == value:
                    return _state(batch)
                if batch.created_at < since:
                    break
        except openai.OpenAIError as err:
            raise BatchAPIError(f"listing batches failed: {short(err)}") from err
        return None

    def state(self, batch_id: str) -> BatchState:
        """The batch's current state. Raises BatchAPIError."""
        try:
            return _state(self._sdk.batches.retrieve(batch_id))
        except openai.OpenAIError as err:
            raise BatchAPIError(f"reading batch {batch_id} failed: {short(err)}") from err

    def cancel(self, batch_id: str) -> None:
        """Ask the endpoint to stop the batch (what it answered already is billed). Raises
        BatchAPIError."""
        try:
            self._sdk.batches.cancel(batch_id)
        except openai.OpenAIError as err:
            raise BatchAPIError(f"cancelling batch {batch_id} failed: {short(err)}") from err

    def answers(self, state: BatchState) -> list[Answer]:
        """Every line the batch answered (an expired batch may have answered some), failed
        lines with their error. Raises BatchAPIError."""
        found: list[Answer] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if not file_id:
                continue
            try:
                text = self._sdk.files.content(file_id).text
            except openai.OpenAIError as err:
                raise BatchAPIError(f"reading file {file_id} failed: {short(err)}") from err
            found += [answer(json.loads(line)) for line in text.splitlines() if line.strip()]
        return found


def answer(line: dict[str, Any]) -> Answer:
    """One output line as an Answer: content only for a 200 chat reply with a JSON object."""
    custom_id = str(line.get("custom_id") or "")
    response = line.get("response") or {}
    if line.get("error") or response.get("status_code") != 200:
        error = line.get("error") or (response.get("body") or {}).get("error") or "no response"
        return Answer(custom_id, None, {}, short(json.dumps(error)))
    body = response.get("body") or {}
    choice = (body.get("choices") or [{}])[0]
    content = (choice.get("message") or {}).get("content") or ""
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or choice.get("finish_reason") not in (None, "stop"):
        return Answer(custom_id, None, body.get("usage") or {}, "reply is not a JSON object")
    return Answer(custom_id, content, body.get("usage") or {})


def _state(batch: Any) -> BatchState:
    return BatchState(
        id=batch.id,
        status=batch.status,
        input_file_id=batch.input_file_id,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
    )
