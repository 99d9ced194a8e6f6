"""An LLM that fails 20% of requests (429, 500, timeouts, malformed JSON) or hangs past the
client's timeout: every document still ends processed, as in the undisturbed run."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.faults.conftest import check
from tests.e2e.faults.harness import RunResult, Stack
from tests.e2e.faults.kinds import llm_faults, llm_hang
from tests.e2e.faults.scenario import run


def test_a_fifth_of_llm_requests_failing_loses_nothing(
    shared_stack: Stack, corpus: list[Path], dataset: str, fault_dir: Path, reference: RunResult
) -> None:
    # Every fifth request fails, the kinds in turn (bench/faults.py also draws them at random).
    scenario = llm_faults(0.2, scheduled=True)
    outcome = run(scenario, shared_stack, corpus, dataset, fault_dir / "llm", reference)
    check(outcome)
    stats = outcome.result.llm_stats
    assert set(stats["faults"]) == {"429", "500", "timeout", "malformed"}, stats
    assert sum(stats["faults"].values()) >= sum(stats["requests"].values()) // 5 - 1, stats
    # Failed extractions were asked again (a malformed reply is always a chat request's).
    assert outcome.result.chat_calls() > outcome.result.job.counts["chunks"], stats


def test_an_llm_hanging_past_the_timeout_loses_nothing(
    shared_stack: Stack, corpus: list[Path], dataset: str, fault_dir: Path, reference: RunResult
) -> None:
    # A third of the requests here; bench/faults.py hangs every text's first request.
    outcome = run(llm_hang(1 / 3), shared_stack, corpus, dataset, fault_dir / "hang", reference)
    check(outcome)
    # The hangs are drawn per request (a third of ~20: a batch's embeddings are one request), so
    # their count varies from run to run (CI once saw 1 in 19); none at all has p = (2/3)^19.
    hung = outcome.result.llm_stats["faults"].get("timeout", 0)
    assert hung >= 1, outcome.result.llm_stats  # each retried after the client's timeout
