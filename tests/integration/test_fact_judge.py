"""The LLM judge of look-alike facts (pipelines/fact_judge.py) with the test server as LLM
(its verdicts: tests/llm_facts.py): the pairs it is asked, the supersession its verdict makes,
its answers cached, its calls metered and priced with the job's, and Batch API mode.

"runs" is no functional relation by the default rules: only the judge can group two people's
"runs" facts of one company, and then the later supersedes the earlier, whichever batch wrote
which (batches of one document, on two worker threads: it judges after the write).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.services import jobs
from api.services.cognify import cognify as start_cognify
from core.facts.functional import FunctionalRelations
from core.models.graph import Edge, entity_id
from core.models.vocabulary import STRUCTURAL_EDGES
from core.settings import Settings
from pipelines.fact_judge import JudgeFacts, Pair
from retrieval.fact_timeline import timeline
from runtime import Runtime
from tests.backends import add_files, llm_settings, succeeded, threaded_runtime, write_files
from tests.llm_facts import JUDGED
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.integration

TEXTS = {
    "mara.txt": "Mara Quist runs Holbeck Foods since 2019. Mara Quist visited Leeds Harbour.",
    "teo.txt": "Teo Varga runs Holbeck Foods since March 2023. Teo Varga visited Leeds Harbour.",
}
PRICED = {"llm_price_input_per_mtok": 1.0, "llm_price_output_per_mtok": 2.0}


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


def settings(server: LLMTestServer, home: Path, **more: Any) -> Settings:
    more = {"facts_judge_max_pairs": 64, **more}  # the judge is off by default
    return Settings(home=home, **llm_settings(server), **PRICED, **more)


def runs(rt: Runtime) -> dict[str, dict[str, Any]]:
    """Holbeck Foods' "runs" facts by holder, as its timeline shows them."""
    found = timeline(rt.graph, "hist", "Holbeck Foods", relation="runs")
    return {f.source: f.model_dump() for f in found.facts}


def served_chat(server: LLMTestServer) -> int:
    return server.stats()["usage"].get("/v1/chat/completions", {}).get("calls", 0)


@pytest.mark.slow
def test_the_judges_verdict_supersedes_cached_and_metered(server, tmp_path):
    JUDGED.clear()
    with threaded_runtime(settings(server, tmp_path / "home", batch_size=1)) as rt:
        assert not add_files(rt, "hist", write_files(tmp_path / "docs", TEXTS)).rejected
        before = served_chat(server)
        job = succeeded(rt, start_cognify(rt, "hist"))
        facts = runs(rt)
        assert facts["Mara Quist"]["group"] == "judged:runs"
        assert (facts["Mara Quist"]["valid_from"], facts["Mara Quist"]["valid_to"]) == (
            "2019-01-01",
            "2023-03-01",
        )
        assert facts["Mara Quist"]["superseded_by"] == "Teo Varga —runs→ Holbeck Foods"
        assert facts["Teo Varga"]["holds"] and facts["Teo Varga"]["group"] == "judged:runs"
        # Asked about each look-alike pair (by both batches when they judge at the same time);
        # two people visiting one place is no conflict.
        asked = dict(JUDGED)
        assert asked.keys() == {"runs", "visited"} and max(asked.values()) <= 2
        visits = rt.graph.edges_of(
            [entity_id("hist", "Leeds Harbour")], exclude=sorted(STRUCTURAL_EDGES)
        )
        assert visits and all("fact_group" not in e.properties for e in visits)
        report = jobs.show(rt, job.id).llm
        assert report.calls == served_chat(server) - before  # the judge's calls are the job's
        assert report.cost_usd > 0
        again = succeeded(rt, start_cognify(rt, "hist", everything=True))
        assert dict(JUDGED) == asked  # answered from the cache
        assert jobs.show(rt, again.id).llm.cache_hits >= 2
        world = ("group", "valid_from", "valid_to", "spans", "superseded_by", "holds")
        assert {k: [v[f] for f in world] for k, v in runs(rt).items()} == {
            k: [v[f] for f in world] for k, v in facts.items()
        }  # the same spans: only the system clock moved


@pytest.mark.slow
def test_in_batch_mode_the_judges_requests_go_through_the_batch_api(server, tmp_path):
    JUDGED.clear()
    more = {"batch_size": 2, "llm_batch_poll_seconds": 0.2}
    with threaded_runtime(settings(server, tmp_path / "home", **more)) as rt:
        assert not add_files(rt, "hist", write_files(tmp_path / "docs", TEXTS)).rejected
        job = succeeded(rt, start_cognify(rt, "hist", llm_mode="batch"), timeout=180)
        assert served_chat(server) == 0  # every call went through the Batch API
        assert server.batches.stats()["answered"] >= 3  # two extractions, the judge's call
        assert runs(rt)["Mara Quist"]["valid_to"] == "2023-03-01"
        assert JUDGED["runs"] == 1 and jobs.show(rt, job.id).llm.cost_usd > 0


def test_the_judge_is_asked_about_the_facts_and_their_passages(server):
    from core.llm.client import LLMClient

    judge = JudgeFacts(LLMClient(server.base_url, "test"), None, FunctionalRelations(), 8)  # type: ignore[arg-type]

    def edge(source: str, text: str) -> Edge:
        return Edge(
            source=source, target="h", name="runs", dataset="ds", properties={"description": text}
        )

    pair = Pair("h", "target", edge("m", "Mara runs Holbeck since 2019."), edge("t", "Teo too."))
    names = {"m": "Mara Quist", "t": "Teo Varga", "h": "Holbeck Foods"}
    [system, user] = judge.messages([pair], names)
    assert "conflict" in system["content"] and "later" in system["content"]
    assert user["content"].splitlines() == [
        "Pair 1:",
        "  Fact 1: Mara Quist —runs→ Holbeck Foods. Passage: Mara runs Holbeck since 2019.",
        "  Fact 2: Teo Varga —runs→ Holbeck Foods. Passage: Teo too.",
    ]
