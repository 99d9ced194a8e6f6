"""Webhooks in embedded mode: real app and worker threads, a real HTTP receiver on loopback
(allowed by `webhook_allow_private`), signatures checked with the snippet of docs/security.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app as cli
from api.http.app import create_app
from api.services.tenants import Tenants
from core.access import Role
from core.settings import Settings
from runtime import Runtime
from tests.backends import http_finished, with_models
from tests.webhook_receiver import WebhookReceiver, readme_verify
from workers.webhooks.deliveries import deliver
from workers.webhooks.subscriptions import Subscriptions

ROOT = Path(__file__).resolve().parents[2]
NOTE = {"name": "note.txt", "text": "Ada Lovelace wrote the first algorithm for a machine."}
FAST_RETRIES = {"webhook_backoff_seconds": 0.2, "webhook_backoff_max_seconds": 1.0}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]) -> Runtime:
    home = tmp_path_factory.mktemp("webhooks-home")
    settings = Settings(home=home, webhook_allow_private=True, **FAST_RETRIES)
    return with_models(Runtime(settings), models)


@pytest.fixture(scope="module")
def keys(runtime: Runtime) -> dict[str, str]:
    tenants = Tenants(runtime.state)
    for tenant in ("acme", "other"):
        tenants.create_tenant(tenant)
    return {t: tenants.create_key(t, Role.WRITER)[0] for t in ("acme", "other")}


@pytest.fixture(scope="module")
def client(runtime: Runtime, keys: dict[str, str]) -> Iterator[TestClient]:
    headers = {"Authorization": f"Bearer {keys['acme']}"}
    with TestClient(create_app(runtime), headers=headers) as client:
        yield client


def start_job(client: TestClient, dataset: str, **body: Any) -> dict[str, Any]:
    note = {**NOTE, "text": f"{NOTE['text']} ({dataset}, {time.time()})"}  # always new work
    added = client.post(f"/api/v1/datasets/{dataset}/data", json={"documents": [note]})
    assert added.status_code == 200, added.text
    accepted = client.post(f"/api/v1/datasets/{dataset}/cognify", json=body)
    assert accepted.status_code == 202, accepted.text
    return accepted.json()


def log_of(client: TestClient, job_id: str, count: int, timeout: float = 30) -> list[dict]:
    """The job's delivery log once it has `count` entries."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/api/v1/jobs/{job_id}/webhooks")
        assert response.status_code == 200, response.text
        if len(response.json()) >= count or time.monotonic() > deadline:
            return response.json()
        time.sleep(0.05)


@pytest.mark.slow
def test_a_job_webhook_gets_one_signed_post_of_the_job_record(client: TestClient) -> None:
    verify = readme_verify()
    with WebhookReceiver() as receiver:
        accepted = start_job(client, "hooked", webhook=receiver.url)
        secret = accepted["webhook_secret"]
        assert secret and accepted["webhook_id"]
        job = http_finished(client, accepted["job_id"])
        (post,) = receiver.wait_for(1)
        time.sleep(1.0)  # a second POST for the same job would have come by now
        assert len(receiver.received) == 1
    assert job["status"] == "succeeded"
    header = post.headers["X-Cogmill-Signature"]
    assert verify(secret, header, post.body)
    assert not verify(secret, header, post.body + b" ")  # the raw body is what is signed
    assert not verify("whsec_wrong", header, post.body)
    # The body is the job record GET /api/v1/jobs/{id} returns (the dataset as the tenant
    # names it), and the headers say which event and delivery it is.
    assert json.loads(post.body) == client.get(f"/api/v1/jobs/{job['id']}").json()
    assert post.headers["X-Cogmill-Event"] == "job.succeeded"
    assert post.headers["X-Cogmill-Delivery"].startswith(job["id"])
    (entry,) = log_of(client, job["id"], 1)
    assert entry["outcome"] == "delivered" and entry["status"] == 200 and entry["attempt"] == 1


@pytest.mark.slow
def test_a_receiver_failing_twice_gets_three_attempts_in_the_log(client: TestClient) -> None:
    with WebhookReceiver(statuses=[500, 500]) as receiver:
        made = client.post("/api/v1/webhooks", json={"url": receiver.url})
        assert made.status_code == 201, made.text
        try:
            accepted = start_job(client, "retried")
            posts = receiver.wait_for(3)
            entries = log_of(client, accepted["job_id"], 3)
        finally:
            client.delete(f"/api/v1/webhooks/{made.json()['id']}")
    assert [e["outcome"] for e in entries] == ["retrying", "retrying", "delivered"]
    assert [e["status"] for e in entries] == [500, 500, 200]
    assert [e["attempt"] for e in entries] == [1, 2, 3]
    # Backoff: the second retry waited about twice as long as the first (0.2 s, 0.4 s).
    gaps = [b.at - a.at for a, b in zip(posts, posts[1:], strict=False)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4, gaps
    assert all(p.body == posts[0].body for p in posts)  # the same record, signed each time
    verify = readme_verify()
    assert all(
        verify(made.json()["secret"], p.headers["X-Cogmill-Signature"], p.body) for p in posts
    )


@pytest.mark.slow
def test_subscriptions_are_the_tenants_own(client: TestClient, keys: dict[str, str]) -> None:
    other = {"Authorization": f"Bearer {keys['other']}"}
    with WebhookReceiver() as receiver:
        made = client.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["failed"]})
        assert made.status_code == 201, made.text
        listed = client.get("/api/v1/webhooks").json()
        assert [w["id"] for w in listed] == [made.json()["id"]] and "secret" not in listed[0]
        assert client.get("/api/v1/webhooks", headers=other).json() == []
        gone = client.delete(f"/api/v1/webhooks/{made.json()['id']}", headers=other)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "webhook_not_found"
        # A succeeded job is not sent to a subscription for `failed` only.
        accepted = start_job(client, "quiet")
        http_finished(client, accepted["job_id"])
        time.sleep(0.5)
        assert receiver.received == []
        assert client.get(f"/api/v1/jobs/{accepted['job_id']}/webhooks").json() == []
        seen = client.get(f"/api/v1/jobs/{accepted['job_id']}/webhooks", headers=other)
        assert seen.status_code == 404
        assert client.delete(f"/api/v1/webhooks/{made.json()['id']}").status_code == 200
    assert client.get("/api/v1/webhooks").json() == []


def test_private_and_non_http_urls_are_refused_with_a_422(
    client: TestClient, runtime: Runtime
) -> None:
    allowed = runtime.settings
    runtime.settings = allowed.model_copy(update={"webhook_allow_private": False})
    try:
        for url, words in (
            ("http://127.0.0.1:9/hook", ["loopback", "COGMILL_WEBHOOK_ALLOW_PRIVATE"]),
            ("http://10.1.2.3/hook", ["private"]),
            ("http://169.254.169.254/latest", ["link-local"]),
            ("http://[::1]/hook", ["loopback"]),
            ("ftp://example.com/hook", ["http:// or https://"]),
        ):
            answer = client.post("/api/v1/webhooks", json={"url": url})
            assert answer.status_code == 422, answer.text
            assert all(w in answer.json()["error"]["message"] for w in words), answer.json()
        added = client.post("/api/v1/datasets/refused/data", json={"documents": [NOTE]})
        assert added.status_code == 200, added.text
        refused = client.post(
            "/api/v1/datasets/refused/cognify", json={"webhook": "http://localhost/x"}
        )
        assert refused.status_code == 422 and "loopback" in refused.json()["error"]["message"]
    finally:
        runtime.settings = allowed


def test_an_address_turned_private_is_refused_at_delivery(
    client: TestClient, runtime: Runtime
) -> None:
    """DNS rebinding: the URL passed when registered; the delivery checks again and refuses."""
    job_id = start_job(client, "rebound")["job_id"]
    http_finished(client, job_id)
    state = runtime.state
    with WebhookReceiver() as receiver:
        sub = Subscriptions(state).add("acme", receiver.url, None, settings=runtime.settings)
        try:
            strict = runtime.settings.model_copy(
                update={"webhook_allow_private": False, "webhook_retry_seconds": 0}
            )
            assert not deliver(state, strict, job_id, sub.id, "succeeded", 1, time.time())
            time.sleep(0.3)
            assert receiver.received == []
        finally:
            Subscriptions(state).remove("acme", sub.id)
    (entry,) = log_of(client, job_id, 1)
    assert entry["outcome"] == "gave_up" and entry["status"] is None
    assert "loopback" in entry["error"]


@pytest.mark.slow
def test_cli_cognify_webhook_and_delivery_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COGMILL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COGMILL_WEBHOOK_ALLOW_PRIVATE", "true")
    (tmp_path / "note.txt").write_text(NOTE["text"], encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli, ["add", str(tmp_path / "note.txt"), "-d", "cli"]).exit_code == 0
    with WebhookReceiver() as receiver:
        done = runner.invoke(cli, ["cognify", "cli", "--webhook", receiver.url])
        assert done.exit_code == 0, done.output
        # Delivered before the command returned: the first attempt runs as the job ends.
        assert len(receiver.received) == 1
    secret = done.output.split("secret (shown once): ")[1].split()[0]
    job_id = done.stdout.split("job ")[1].split(":")[0]
    post = receiver.received[0]
    assert readme_verify()(secret, post.headers["X-Cogmill-Signature"], post.body)
    assert json.loads(post.body)["id"] == job_id
    shown = runner.invoke(cli, ["jobs", "webhooks", job_id, "--json"])
    assert shown.exit_code == 0, shown.output
    (entry,) = [json.loads(line) for line in shown.output.splitlines()]
    assert entry["outcome"] == "delivered" and entry["url"] == receiver.url
    monkeypatch.setenv("COGMILL_WEBHOOK_ALLOW_PRIVATE", "false")
    refused = runner.invoke(cli, ["webhooks", "add", "http://127.0.0.1:9/hook"])
    assert refused.exit_code == 2 and "loopback address" in refused.output, refused.output
    assert runner.invoke(cli, ["webhooks", "list"]).output == ""


@pytest.mark.slow  # `cogmill` processes, and the retries' backoff
def test_embedded_retries_outlive_the_process_that_scheduled_them(tmp_path: Path) -> None:
    """A one-shot `cogmill cognify` process ends before its retry is due; the next cogmill
    process that starts worker threads on the same home makes it."""
    env = {
        **os.environ,
        "COGMILL_HOME": str(tmp_path / "home"),
        "COGMILL_WEBHOOK_ALLOW_PRIVATE": "true",
        "COGMILL_WEBHOOK_BACKOFF_SECONDS": "2",
    }
    note = tmp_path / "note.txt"
    note.write_text(NOTE["text"], encoding="utf-8")

    def cogmill(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "api.cli", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    with WebhookReceiver(statuses=[500]) as receiver:
        cogmill("add", str(note), "-d", "later")
        job_id = cogmill("cognify", "later", "--webhook", receiver.url).stdout.split("job ")[1]
        job_id = job_id.split(":")[0]
        assert len(receiver.received) == 1  # the 500; the retry was due after the exit
        time.sleep(2.5)
        assert len(receiver.received) == 1
        settings = Settings(home=tmp_path / "home", webhook_allow_private=True)
        with TestClient(create_app(Runtime(settings))) as client:
            receiver.wait_for(2)
            entries = log_of(client, job_id, 2)
    assert [(e["attempt"], e["outcome"]) for e in entries] == [(1, "retrying"), (2, "delivered")]
    assert receiver.received[0].body == receiver.received[1].body
