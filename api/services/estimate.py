"""`cognify --estimate`: the LLM calls, tokens and cost a cognify would take, without calling
the LLM or storing anything.

The documents are planned as the real run plans them and read and chunked by the pipeline's
own classify and chunk steps; every extraction prompt is built by the extractor the real run
would use (its prompt, graph model and JSON schema) and counted with the local tokenizer,
except those the response cache would answer. A document of several chunks gets one summary
call, whose input is the chunk summaries the extraction has not written yet: each is assumed
to be about its chunk's first sentence (SUMMARY_GUESS_CHARS at most). A pipeline with events
(`temporal`) asks once more per chunk; that prompt lists the entities the extraction found,
known only when the cache holds the extraction (else the list is left out: an undercount of a
few tokens per name). Completions are not known either: `llm_estimate_completion_tokens` per
call.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from api.services.datasets import checked, existing
from core.access import LOCAL, Caller
from core.errors import InvalidInput
from core.llm.cache import cache_key
from core.llm.extractor import LLMExtractor
from core.llm.schemas import response_format, schema_of
from core.llm.usage import cost_usd, count_tokens, prompt_text
from core.models.custom import graph_model_of
from pipelines.base import Pipeline
from pipelines.definitions import get_pipeline
from pipelines.extract_events import EventList, LLMEventExtractor
from pipelines.models import Chunk, ChunkBatch, DocumentBatch
from pipelines.summarize_documents import SummaryAnswer, summary_messages
from runtime import Runtime
from workers.orchestration import plan_batches

SUMMARY_GUESS_CHARS = 300
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class CognifyEstimate(BaseModel):
    """What a cognify would ask of the LLM."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


def estimate(
    rt: Runtime,
    dataset: str,
    *,
    everything: bool = False,
    graph_model: dict[str, Any] | None = None,
    pipeline: str | None = None,
    caller: Caller = LOCAL,
) -> CognifyEstimate:
    """The calls, tokens and cost of `cognify` with the same arguments; nothing is stored and
    no LLM is called. Raises DatasetNotFoundError, InvalidInput for a bad graph model, and
    InvalidInput with `pipeline` (planning under a forced pipeline re-assigns documents)."""
    checked(dataset)
    if pipeline is not None:
        raise InvalidInput(
            "--estimate counts each document's own pipeline; run it without --pipeline"
        )
    options: dict[str, Any] = {}
    if graph_model is not None:
        graph_model_of(graph_model)
        options["graph_model"] = graph_model
    dataset = existing(rt, dataset, caller)  # its stored name, scoped by the caller's tenant
    calls = prompts = 0
    asked: set[str] = set()  # cache keys asked before in this job: the cache answers again
    for batch in plan_batches(rt, dataset, None, "all" if everything else "changed"):
        used = _batch_prompts(rt, get_pipeline(batch.pipeline), batch, options, asked)
        calls, prompts = calls + len(used), prompts + sum(used)
    s = rt.settings
    completions = calls * s.llm_estimate_completion_tokens
    counts = {"prompt_tokens": prompts, "completion_tokens": completions}
    return CognifyEstimate(
        calls=calls,
        prompt_tokens=prompts,
        completion_tokens=completions,
        cost_usd=cost_usd("llm", counts, s),
    )


def _batch_prompts(
    rt: Runtime,
    pipeline: Pipeline,
    batch: DocumentBatch,
    options: dict[str, Any],
    asked: set[str],
) -> list[int]:
    """The prompt tokens of each LLM call the batch's run would make."""
    if "extract_graph" not in pipeline.step_names:
        return []
    extract = pipeline.build_step("extract_graph", rt, options)
    extractor = getattr(extract, "extractor", None)
    if not isinstance(extractor, LLMExtractor):
        return []  # the offline extractor: no LLM calls
    classified = pipeline.build_step("classify", rt, options).run(batch)
    chunks = pipeline.build_step("chunk", rt, options).run(classified)
    assert isinstance(chunks, ChunkBatch)
    texts: list[str] = []
    graphs: list[Any] = []  # each chunk's cached extraction (None: not cached)
    for chunk in chunks.chunks:
        messages = extractor.messages(chunk.text)
        graphs.append(graph := _reply(extractor, messages, extractor.graph_model))
        if graph is None and _first_ask(extractor, messages, extractor.graph_model, asked):
            texts.append(prompt_text(messages, _format(extractor.graph_model)))
    if "summarize_documents" in pipeline.step_names and rt.llm is not None:
        texts += _summary_prompts(rt, chunks.chunks)
    if "extract_events" in pipeline.step_names:
        events = getattr(pipeline.build_step("extract_events", rt, options), "extractor", None)
        if isinstance(events, LLMEventExtractor):
            texts += _event_prompts(events, chunks.chunks, graphs, asked)
    return count_tokens(texts)


def _event_prompts(
    events: LLMEventExtractor, chunks: list[Chunk], graphs: list[Any], asked: set[str]
) -> list[str]:
    """The event call of each chunk the cache would not answer; its entity list is the cached
    extraction's (`graphs`, by chunk), when there is one."""
    prompts = []
    for chunk, graph in zip(chunks, graphs, strict=True):
        if not chunk.text.strip():
            continue  # the real run asks nothing for it either
        names = [] if graph is None else [e.name for e in graph.entities]
        messages = events.messages(chunk.text, names)
        if _reply(events, messages, EventList) is None and _first_ask(
            events, messages, EventList, asked
        ):
            prompts.append(prompt_text(messages, _format(EventList)))
    return prompts


def _summary_prompts(rt: Runtime, chunks: list[Chunk]) -> list[str]:
    """The summary call of each document of several chunks, with guessed chunk summaries."""
    by_document: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_document.setdefault(chunk.document_id, []).append(chunk)
    fmt = _format(SummaryAnswer)
    return [
        prompt_text(summary_messages(guessed, rt.settings.document_summary_chars), fmt)
        for parts in by_document.values()
        if len(guessed := [_first_sentence(c.text) for c in sorted(parts, key=_index)]) > 1
    ]


def _index(chunk: Chunk) -> int:
    return chunk.index


def _first_sentence(text: str) -> str:
    return _SENTENCE.split(text.strip(), maxsplit=1)[0][:SUMMARY_GUESS_CHARS]


def _format(schema: type[BaseModel]) -> dict[str, Any]:
    return response_format(schema, schema_of(schema), True)


Asker = LLMExtractor | LLMEventExtractor


def _reply(asker: Asker, messages: list[dict[str, str]], schema: type[BaseModel]) -> Any:
    """The LLM cache's reply to these messages, parsed (None: not cached, or no cache)."""
    client = asker.client
    if client.cache is None:
        return None
    raw = client.cache.get(cache_key(client.model, messages, schema_of(schema)))
    return None if raw is None else schema.model_validate_json(raw)


def _first_ask(
    asker: Asker, messages: list[dict[str, str]], schema: type[BaseModel], asked: set[str]
) -> bool:
    """Whether the real run would send this request: with a cache, an identical request of
    the job sent first answers it (`asked` holds the requests counted so far)."""
    if asker.client.cache is None:
        return True
    key = cache_key(asker.client.model, messages, schema_of(schema))
    if key in asked:
        return False
    asked.add(key)
    return True
