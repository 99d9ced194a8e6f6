"""A short load and soak run (bench/load.py has the long one): a few API clients call every
route of a `cogmill serve` subprocess while cognify jobs run back to back on Celery worker
processes with Neo4j and Redis; nothing may fail, every job must succeed, and the server's
RSS must stay flat after warm-up. The workers run the default pool (threads): what this run
asserts is the API's, and each pool's workers are proven under faults (tests/e2e/faults);
`bench/load.py` runs both pools."""

from __future__ import annotations

import pytest

from bench.load import print_report, run_load
from bench.loadtest.stack import LoadConfig
from bench.loadtest.traffic import ROUTES
from tests.services import neo4j_uri, redis_url

pytestmark = [pytest.mark.e2e, pytest.mark.services]

DOCUMENTS = 30
RSS_GROWTH_BOUND = 0.25  # generous: a leak per request grows far more over the run


def test_clients_on_every_route_while_a_job_runs() -> None:
    config = LoadConfig(
        pool="threads",
        clients=4,
        duration_s=15,
        warmup_s=8,
        deadline_s=300,
        documents=DOCUMENTS,
        batch_size=2,
        llm_latency_ms=300,
        baseline=False,  # the undisturbed job is the bench's: its figures are not asserted
        redis_url=redis_url().rsplit("/", 1)[0] + "/8",  # keys under a prefix of the run's own
        neo4j_uri=neo4j_uri(),
    )
    report = run_load(config)
    print_report(report)
    assert report["errors"] == [], "\n".join(report["errors"])
    exercised = {route for route, figures in report["routes"].items() if figures["n"]}
    assert {*ROUTES, "events:follow"} <= exercised, exercised
    jobs = report["jobs_under_load"]
    assert jobs["statuses"] == {"succeeded": jobs["jobs"]} and jobs["document_errors"] == 0, jobs
    assert jobs["documents"] == DOCUMENTS * jobs["jobs"], jobs
    assert report["job_polls_while_running"] > 0, "no job was running when the clients polled"
    rss = report["rss"]
    assert rss["growth_after_warmup"] <= RSS_GROWTH_BOUND, rss
