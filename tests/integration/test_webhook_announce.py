"""Announcing a finished job (workers/webhooks/): every finished status, once each, to the
subscriptions asking for it; and the URL guard on address literals (no DNS needed)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models.jobs import Job, JobStatus, utcnow
from core.settings import Settings
from runtime import Runtime, use_runtime
from tests.webhook_receiver import WebhookReceiver, readme_verify
from workers.jobs import JobTracker
from workers.webhooks.deliveries import delivery_log
from workers.webhooks.post import WebhookError, check_url, signature
from workers.webhooks.subscriptions import Subscriptions, finished_statuses

pytestmark = pytest.mark.integration


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = Runtime(Settings(home=tmp_path, webhook_allow_private=True))  # embedded: inline
    use_runtime(rt)
    try:
        yield rt
    finally:
        use_runtime(None)
        rt.close()


def job(status: JobStatus, dataset: str = "docs") -> Job:
    return Job(id=f"job{status.value}", dataset=dataset, pipeline="default",
               pipeline_version="1", status=status)  # fmt: skip


def test_every_finished_status_is_sent_once_to_whoever_asked(runtime: Runtime) -> None:
    statuses = [JobStatus(s) for s in finished_statuses()]
    assert {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED} <= set(statuses)
    tracker, subs = JobTracker(runtime.state), Subscriptions(runtime.state)
    with WebhookReceiver() as everything, WebhookReceiver() as failures:
        all_of_them = subs.add(None, everything.url, None, settings=runtime.settings)
        subs.add(None, failures.url, ["failed"], settings=runtime.settings)
        subs.add("acme", failures.url, None, settings=runtime.settings)  # another tenant's
        for status in statuses:
            finished = job(status)
            tracker.save(finished)
            tracker.save(finished)  # a finalise repeated by a redelivered task
        tracker.save(job(JobStatus.RUNNING, "other"))  # unfinished: nothing
        posts = everything.wait_for(len(statuses))
        time.sleep(0.3)
    assert [p.headers["X-Cogmill-Event"] for p in everything.received] == [
        f"job.{s.value}" for s in statuses
    ]
    assert [p.headers["X-Cogmill-Event"] for p in failures.received] == ["job.failed"]
    verify = readme_verify()
    assert all(verify(all_of_them.secret, p.headers["X-Cogmill-Signature"], p.body) for p in posts)
    assert [json.loads(p.body)["status"] for p in posts] == [s.value for s in statuses]
    (entry,) = delivery_log(runtime.state, "jobfailed")[:1]
    assert entry["outcome"] == "delivered"


def test_each_pause_and_the_end_of_a_resumed_job_are_sent(runtime: Runtime) -> None:
    """A job paused by its budget, resumed, paused again and then finished: three deliveries,
    each with its own delivery id (a receiver deduplicating on it keeps all three); the
    repeated save of one pause sends nothing more."""
    tracker, statuses = JobTracker(runtime.state), []
    with WebhookReceiver() as receiver:
        Subscriptions(runtime.state).add(None, receiver.url, None, settings=runtime.settings)
        for status in (JobStatus.PAUSED_BUDGET, JobStatus.PAUSED_BUDGET, JobStatus.SUCCEEDED):
            tracker.save(job(JobStatus.RUNNING).model_copy(update={"id": "jobresumed"}))
            done = job(status).model_copy(update={"id": "jobresumed", "finished_at": utcnow()})
            tracker.save(done)
            tracker.save(done)  # a finalise repeated by a redelivered task
            statuses.append(status.value)
            posts = receiver.wait_for(len(statuses))
        time.sleep(0.3)
    assert [json.loads(p.body)["status"] for p in receiver.received] == statuses
    deliveries = [p.headers["X-Cogmill-Delivery"] for p in posts]
    assert len(set(deliveries)) == 3, deliveries
    assert all(d.startswith("jobresumed.") for d in deliveries)


def test_a_tenant_job_goes_to_the_tenant_only_with_its_own_dataset_name(runtime: Runtime) -> None:
    subs = Subscriptions(runtime.state)
    with WebhookReceiver() as local, WebhookReceiver() as acme:
        subs.add(None, local.url, None, settings=runtime.settings)
        subs.add("acme", acme.url, None, settings=runtime.settings)
        JobTracker(runtime.state).save(job(JobStatus.SUCCEEDED, "acme:reports"))
        (post,) = acme.wait_for(1)
        time.sleep(0.3)
        assert local.received == []
    assert json.loads(post.body)["dataset"] == "reports"


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("10.0.0.8", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("[fe80::1]", "link-local"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "reserved"),
        ("100.64.0.1", "not globally routable"),
    ],
)
def test_internal_addresses_are_refused(address: str, reason: str) -> None:
    with pytest.raises(WebhookError, match=f"a {reason} address"):
        check_url(f"http://{address}:8080/hook", allow_private=False)
    assert check_url(f"http://{address}:8080/hook", allow_private=True).port == 8080


@pytest.mark.parametrize(
    "url", ["ftp://203.0.113.9/x", "file:///etc/passwd", "http:///x", "https://u:p@203.0.113.9/"]
)
def test_only_plain_http_urls(url: str) -> None:
    with pytest.raises(WebhookError):
        check_url(url, allow_private=False)


def test_a_public_address_is_accepted_and_pinned() -> None:
    target = check_url("https://8.8.8.8/hooks?a=1", allow_private=False)
    assert (target.scheme, target.address, target.port, target.path) == (
        "https", "8.8.8.8", 443, "/hooks?a=1",
    )  # fmt: skip


def test_the_readme_snippet_refuses_tampering_and_old_signatures() -> None:
    verify, body, now = readme_verify(), b'{"id": "j"}', int(time.time())
    assert verify("s3cret", signature("s3cret", now, body), body)
    assert not verify(
        "s3cret", signature("s3cret", now, body).replace(f"t={now}", f"t={now + 1}"), body
    )
    assert not verify("s3cret", signature("s3cret", now - 3600, body), body)
