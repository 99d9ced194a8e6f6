"""`cognify --estimate`: the prompts the real run would send, counted without calling the LLM
or storing anything, against the real run's counts (the server counts with the same
tokenizer, as a real endpoint counts with its own)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli_app
from api.http.app import create_app
from api.services import jobs
from api.services.estimate import estimate
from core.settings import Settings
from runtime import Runtime
from tests.backends import (
    EMBEDDED,
    Backend,
    add_files,
    http_finished,
    llm_settings,
    succeeded,
    write_files,
)
from tests.llm_server import LLMTestServer
from workers.orchestration import cognify
from workers.usage import job_usage

TEXTS = {
    f"doc{i}.txt": "\n\n".join(
        f"Person{i}x{k} Smith founded Company{i}x{k} Labs in City{k} in {1990 + k}. "
        f"Person{i}x{k} Smith works for Company{i}x{k} Labs. The work was published in "
        f"Journal{i}x{k} and read by Reader{i}x{k} Jones."
        for k in range(1 + 2 * (i % 3))
    )
    for i in range(6)
}
PRICES = {"llm_price_input_per_mtok": 0.15, "llm_price_output_per_mtok": 0.6}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(usage="wordpiece") as server:
        yield server


def snapshot(rt: Runtime, dataset: str) -> tuple[object, ...]:
    """What a run would change: state keys, graph counts, vectors."""
    return (sorted(rt.state.keys("")), rt.graph.count(dataset))


@pytest.mark.slow
def test_estimate_matches_the_run(backend: Backend, server: LLMTestServer, tmp_path: Path) -> None:
    settings = {**llm_settings(server), **PRICES, "batch_size": 2, "chunk_tokens": 40}
    with backend.runtime(threads=2, **settings) as rt:
        dataset = backend.dataset("estimate")
        assert not add_files(rt, dataset, write_files(tmp_path / "docs", TEXTS)).rejected
        before = snapshot(rt, dataset)
        guess = estimate(rt, dataset)
        assert server.calls() == 0 and server.calls("/v1/embeddings") == 0  # nothing asked
        assert snapshot(rt, dataset) == before  # nothing stored
        assert guess.completion_tokens == guess.calls * rt.settings.llm_estimate_completion_tokens
        cost = (guess.prompt_tokens * 0.15 + guess.completion_tokens * 0.6) / 1e6
        assert guess.cost_usd == pytest.approx(cost, abs=1e-6) and guess.cost_usd > 0

        job = jobs.show(rt, succeeded(rt, cognify(rt, dataset)).id)
        summaries = job_usage(rt.state, job.id, "summarize_documents")["llm"]["calls"]
        assert job.llm.calls == guess.calls > len(TEXTS) and summaries > 0, (job.llm, guess)
        assert job.llm.prompt_tokens == pytest.approx(guess.prompt_tokens, rel=0.03)

        # Everything again: the cache answers the extractions, so only summaries are counted.
        again = estimate(rt, dataset, everything=True)
        assert again.calls == summaries and server.calls() == job.llm.calls
        assert estimate(rt, dataset).calls == 0  # nothing changed: nothing to do


@pytest.mark.slow
def test_estimate_counts_the_event_calls(server: LLMTestServer, tmp_path: Path) -> None:
    """The temporal pipeline asks for events once per chunk; a re-run's event prompts name the
    cached extraction's entities, so the cache check finds them too."""
    settings = {**llm_settings(server), "batch_size": 2, "chunk_tokens": 40}
    with Backend(EMBEDDED, tmp_path).runtime(threads=2, **settings) as rt:
        paths = write_files(tmp_path / "docs", TEXTS)
        assert not add_files(rt, "events", paths, pipeline="temporal").rejected
        guess = estimate(rt, "events")
        job = jobs.show(rt, succeeded(rt, cognify(rt, "events")).id)
        asked = job_usage(rt.state, job.id, "extract_events")["llm"]["calls"]
        assert asked > 0 and job.llm.calls == guess.calls, (job.llm, guess)
        # The real prompts list the entities found; the estimate cannot know them beforehand.
        assert guess.prompt_tokens < job.llm.prompt_tokens < guess.prompt_tokens * 1.25
        again = estimate(rt, "events", everything=True)
        summaries = job_usage(rt.state, job.id, "summarize_documents")["llm"]["calls"]
        assert again.calls == summaries, (again, summaries)  # the cache answers both others


@pytest.mark.slow
def test_estimate_faces(server: LLMTestServer, tmp_path: Path) -> None:
    """`cogmill cognify D --estimate --json` and `POST .../cognify?estimate=true` (or the body
    flag) answer the same counts and start no job."""
    home, settings = tmp_path / "home", {**llm_settings(server), **PRICES, "chunk_tokens": 40}
    env = {"COGMILL_HOME": str(home)} | {
        f"COGMILL_{k.upper()}": str(v) for k, v in settings.items()
    }
    paths = write_files(tmp_path / "docs", TEXTS)
    runner = CliRunner()
    added = runner.invoke(cli_app, ["add", *map(str, paths), "--dataset", "est"], env=env)
    assert added.exit_code == 0, added.output
    result = runner.invoke(cli_app, ["cognify", "est", "--estimate", "--json"], env=env)
    assert result.exit_code == 0, result.output
    cli = json.loads(result.output)
    assert set(cli) == {"calls", "prompt_tokens", "completion_tokens", "cost_usd"} and cli["calls"]
    text = runner.invoke(cli_app, ["cognify", "est", "--estimate"], env=env)
    assert f"LLM calls {cli['calls']}, prompt tokens {cli['prompt_tokens']}" in text.output
    refused = runner.invoke(
        cli_app, ["cognify", "est", "--estimate", "--pipeline", "default"], env=env
    )
    assert refused.exit_code != 0 and "without --pipeline" in refused.output

    rt = Runtime(Settings(home=home, **settings))
    with TestClient(create_app(rt)) as client:
        by_query = client.post("/api/v1/datasets/est/cognify?estimate=true")
        by_body = client.post("/api/v1/datasets/est/cognify", json={"estimate": True})
        assert by_query.status_code == by_body.status_code == 200, by_query.text
        assert by_query.json() == by_body.json() == cli
        assert client.get("/api/v1/jobs").json() == [] and server.calls() == 0
        accepted = client.post("/api/v1/datasets/est/cognify").json()
        job = http_finished(client, accepted["job_id"])
    assert job["llm"]["calls"] == cli["calls"]
    assert job["llm"]["prompt_tokens"] == pytest.approx(cli["prompt_tokens"], rel=0.03)
    shown = runner.invoke(cli_app, ["jobs", "show", accepted["job_id"], "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["llm"] == job["llm"]
    # The run printed its tokens and cost: a second cognify has nothing left to do.
    done = runner.invoke(cli_app, ["cognify", "est"], env=env)
    assert done.exit_code == 0 and "LLM calls 0 (0 from cache)" in done.output, done.output
