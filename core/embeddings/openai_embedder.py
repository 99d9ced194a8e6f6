"""Embeddings from any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama, TEI)."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import openai

from core.llm import outage
from core.llm import usage as accounting
from core.llm.client import NO_API_KEY, LLMError
from core.llm.retries import backoff_delay, classify, short
from core.ports import batched

log = logging.getLogger("cogmill.embeddings")


class OpenAIEmbedder:
    """The Embedder port over HTTP: batched, retried, L2-normalised float32 vectors."""

    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int,
        api_key: str = "",
        batch_size: int = 256,
        *,
        timeout: float = 60.0,
        max_attempts: int = 6,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        if not base_url or not model:
            raise ValueError(f"base_url and model are required, got {base_url!r}, {model!r}")
        if dim < 1 or batch_size < 1 or max_attempts < 1:
            raise ValueError(
                f"dim, batch_size and max_attempts must be at least 1, "
                f"got {dim}, {batch_size}, {max_attempts}"
            )
        self.model_name = model
        self.dim = dim
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.backoff = (backoff_base, backoff_cap)
        self.endpoint = f"{base_url.rstrip('/')}/embeddings"
        # The sync client is thread-safe; retries happen here, so the SDK's are off.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or NO_API_KEY, timeout=timeout, max_retries=0
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), dim). Raises ValueError, LLMError."""
        if not texts:
            raise ValueError("embed needs at least one text")
        parts = [self._embed_batch(list(batch)) for batch in batched(texts, self.batch_size)]
        vectors = np.concatenate(parts, axis=0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # A zero vector stays zero rather than becoming NaN.
        return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32, copy=False)

    def close(self) -> None:
        """Release connections."""
        self._client.close()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """One batch, retried on 429/5xx/timeouts like the chat client."""
        last, unanswered = "no attempt made", False
        for attempt in range(1, self.max_attempts + 1):
            try:
                # Plain JSON posted, the raw body parsed with json: the SDK's model construction
                # costs ~1 s per thousand 384-d vectors, and its typed `create` checks every
                # input against its types (13 of 34 µs a text). base64 float32 (the SDK's
                # default) is decoded ~4x faster than float lists.
                raw = self._client.post(
                    "/embeddings",
                    body={"model": self.model_name, "input": texts, "encoding_format": "base64"},
                    cast_to=httpx.Response,
                )
            except openai.OpenAIError as err:
                last, unanswered = self._failed(err, attempt), True
                continue
            try:
                body = json.loads(raw.content)
                data = body["data"]
            except (ValueError, KeyError, TypeError) as err:
                last = f"{self.endpoint}: the answer is not an embeddings list ({short(err)})"
                unanswered = False
                continue
            matrix = self._matrix(data, len(texts))
            accounting.record(
                "embeddings", body.get("usage"), prompt="\n".join(texts), completion=""
            )
            return matrix
        if unanswered:
            outage.gave_up()
        raise LLMError(f"{last} (gave up after {self.max_attempts} attempts)")

    def _failed(self, err: openai.OpenAIError, attempt: int) -> str:
        """Describe a failed attempt; raise if retrying cannot help, else sleep before the next."""
        failure = classify(err)
        status = f"HTTP {failure.status}" if failure.status else failure.kind
        message = f"{self.endpoint}: {status} on attempt {attempt}: {failure.detail}"
        if not failure.retryable:
            raise LLMError(f"{message} (not retryable)") from err
        if attempt < self.max_attempts:
            delay = backoff_delay(attempt, failure.retry_after, *self.backoff)
            log.warning(
                "embed_retry endpoint=%s status=%s delay=%.2f", self.endpoint, status, delay
            )
            time.sleep(delay)
        return message

    def _matrix(self, data: Sequence[dict[str, Any]], count: int) -> np.ndarray:
        """The vectors in input order; LLMError when the server answered for other inputs."""
        if len(data) != count:
            raise LLMError(f"{self.endpoint}: {len(data)} embeddings for {count} inputs")
        ordered = sorted(data, key=lambda item: item["index"])
        rows = [_vector(item["embedding"]) for item in ordered]
        if wrong := next((len(row) for row in rows if len(row) != self.dim), None):
            raise LLMError(
                f"{self.endpoint}: model {self.model_name} returns {wrong}-dim "
                f"vectors, configured dim is {self.dim}"
            )
        return np.stack(rows)


def _vector(value: str | list[float]) -> np.ndarray:
    """One embedding: base64 little-endian float32 as asked, or a float list from servers that
    answer lists whatever they are asked."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)
