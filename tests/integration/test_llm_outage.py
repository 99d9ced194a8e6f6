"""An LLM endpoint that stops answering for a while: a step whose calls gave up runs again
after a pause (workers/tasks.py `ride_out_llm_outages`), so no document becomes an error and
the graph is the one an undisturbed run writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.embeddings.openai_embedder import OpenAIEmbedder
from core.llm import outage
from core.llm.aio import run_sync
from core.llm.client import LLMClient, LLMError
from core.models.extraction import KnowledgeGraph
from core.models.jobs import Job
from tests.backends import (
    Backend,
    finished,
    llm_settings,
    write_files,
)
from tests.backends import add_files as add
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify

TEXTS = {
    f"note{i}.txt": f"Ada{i} Lovelace met Charles{i} Babbage in London{i}. "
    f"Charles{i} Babbage founded Engine{i} Works in Paris{i}."
    for i in range(4)
}
# The endpoint is down for its first eight chat and eight embeddings requests. A chat call
# gives up after two attempts (the four first extractions of the job all give up), the
# embedder after its six (the first batch's embeddings give up).
OUTAGE = {"outage_requests": 8, "fail_kind": "500"}
Outcome = tuple[Job, list[tuple[str, str]], dict[str, int]]


def run(
    backend: Backend, folder: Path, name: str, pauses: list[float], **faults: object
) -> Outcome:
    """Ingest TEXTS into a dataset of its own with a fresh LLM server; the job, the entities
    (name, properties) and the node and edge counts."""
    with LLMTestServer(**faults) as server:
        settings = {**llm_settings(server), "batch_size": 2, "llm_max_attempts": 2}
        with backend.runtime(threads=2, llm_outage_pauses_seconds=pauses, **settings) as rt:
            dataset = backend.dataset(name)
            assert not add(rt, dataset, write_files(folder / name, TEXTS)).rejected
            job = finished(rt, cognify(rt, dataset), 120)
            nodes = rt.graph.find_nodes(dataset, "Entity", limit=10_000)
            found = sorted((n.name, json.dumps(n.properties, sort_keys=True)) for n in nodes)
            return job, found, rt.graph.count(dataset)


@pytest.mark.slow
def test_a_step_runs_again_after_an_outage_and_loses_nothing(
    backend: Backend, tmp_path: Path
) -> None:
    # Without a pause to ride it out the outage fails documents: the fault bites.
    gave_up, _, _ = run(backend, tmp_path, "no-pause", [], **OUTAGE)
    assert gave_up.errors, gave_up

    # With one, nothing is lost. It runs before the undisturbed run, whose replies would
    # otherwise be in the LLM cache (failed calls are never cached).
    rode_out, found, counts = run(backend, tmp_path, "outage", [0.2] * 3, **OUTAGE)
    assert rode_out.status.value == "succeeded" and not rode_out.errors, rode_out.errors
    assert rode_out.counts["documents"] == len(TEXTS)

    calm, expected, expected_counts = run(backend, tmp_path, "calm", [])
    assert not calm.errors
    assert found == expected and len(found) >= 3 * len(TEXTS), found
    assert counts == expected_counts


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["500", "timeout"])
def test_only_unanswered_calls_count_as_an_outage(kind: str) -> None:
    """What the step shell watches: a call that got no answer on any attempt (chat or
    embeddings) counts; one that got answers, if invalid ones, does not."""
    with LLMTestServer(outage_requests=2, fail_kind=kind, hang_seconds=2) as server:
        embedder = OpenAIEmbedder(server.base_url, "test", 64, timeout=0.5, max_attempts=2)
        chat = LLMClient(server.base_url, "test", timeout=0.5, max_attempts=2)
        messages = [{"role": "user", "content": "Ada Lovelace met Charles Babbage."}]
        with outage.watching() as unanswered:
            with pytest.raises(LLMError):
                embedder.embed(["Ada Lovelace"])
            with pytest.raises(LLMError):
                run_sync(chat.structured(messages, KnowledgeGraph))
        assert unanswered.calls == 2
        with outage.watching() as unanswered:  # the endpoint is back
            assert embedder.embed(["Ada Lovelace"]).shape == (1, 64)
            assert run_sync(chat.structured(messages, KnowledgeGraph)).entities
        assert unanswered.calls == 0
        # Answered with invalid JSON every time: the model's fault, not an outage.
        server.configure(outage_requests=10**6, fail_kind="malformed")
        with outage.watching() as unanswered, pytest.raises(LLMError, match="invalid reply"):
            run_sync(chat.structured(messages + [{"role": "user", "content": "x"}], KnowledgeGraph))
        assert unanswered.calls == 0
