"""The synchronous client: `Client(url, api_key=...)`, a method per operation of the HTTP API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TypeVar

import httpx

from cogmill_client import models as m
from cogmill_client.binding import (
    DEFAULT_TIMEOUT,
    answer,
    backoff,
    check_deadline,
    headers,
    request_args,
    sync_method,
)
from cogmill_client.calls import Call, datasets, queries
from cogmill_client.calls import sync as sync_calls
from cogmill_client.errors import RateLimitError, StreamEndedError, error_from
from cogmill_client.events import JobEvent, Progress, SseParser, Tracker

T = TypeVar("T")


class Client:
    """A cogmill server's HTTP API. Error answers raise CogmillError subclasses
    (cogmill_client.errors); connection failures raise httpx's own errors. `http`: an httpx
    client to send with instead (its own base URL, headers and timeouts then apply)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        stream_retries: int = 5,
        http: httpx.Client | None = None,
    ) -> None:
        self.stream_retries = stream_retries  # reconnects in a row before a dropped stream raises
        self._http = http or httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers(api_key), timeout=timeout
        )

    def send(self, call: Call[T]) -> T:
        """Send a built call (cogmill_client.calls) and read its answer."""
        return answer(call, self._http.request(call.method, call.url, **request_args(call)))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    list_datasets = sync_method(datasets.list_datasets)
    add_files = sync_method(datasets.add_files)
    add_texts = sync_method(datasets.add_texts)
    list_documents = sync_method(datasets.list_documents)
    delete_document = sync_method(datasets.delete_document)
    delete_dataset = sync_method(datasets.delete_dataset)
    cognify = sync_method(datasets.cognify)
    estimate = sync_method(datasets.estimate)
    list_jobs = sync_method(datasets.list_jobs)
    get_job = sync_method(datasets.get_job)
    cancel_job = sync_method(datasets.cancel_job)
    resume_job = sync_method(datasets.resume_job)
    job_webhooks = sync_method(datasets.job_webhooks)
    search = sync_method(queries.search)
    facts = sync_method(queries.facts)
    route = sync_method(queries.route)
    me = sync_method(queries.me)
    remember = sync_method(queries.remember)
    recall = sync_method(queries.recall)
    improve = sync_method(queries.improve)
    forget = sync_method(queries.forget)
    list_sessions = sync_method(queries.list_sessions)
    session_history = sync_method(queries.session_history)
    delete_session = sync_method(queries.delete_session)
    export_graph = sync_method(queries.export_graph)
    neighbourhood = sync_method(queries.neighbourhood)
    list_webhooks = sync_method(queries.list_webhooks)
    add_webhook = sync_method(queries.add_webhook)
    remove_webhook = sync_method(queries.remove_webhook)
    health = sync_method(queries.health)
    ready = sync_method(queries.ready)
    metrics = sync_method(queries.metrics)
    sync = sync_method(sync_calls.sync)
    list_schedules = sync_method(sync_calls.list_schedules)
    add_schedule = sync_method(sync_calls.add_schedule)
    pause_schedule = sync_method(sync_calls.pause_schedule)
    resume_schedule = sync_method(sync_calls.resume_schedule)
    remove_schedule = sync_method(sync_calls.remove_schedule)

    def events(self, job_id: str, *, after: int = 0) -> Iterator[JobEvent]:
        """A job's events after id `after`, then new ones until `finished` (the last one).

        A stream the server ends early (its time limit) or a dropped connection is resumed
        with Last-Event-ID, up to `stream_retries` failures in a row. Closing the iterator
        closes the stream (and frees its slot on the server)."""
        for event in self._stream(job_id, after):
            if event is not None:
                yield event

    def _stream(self, job_id: str, after: int) -> Iterator[JobEvent | None]:
        """The events, and None for each keep-alive the server sends while the job is idle."""
        parser, failures = SseParser(after or None), 0
        call = datasets.events(job_id, after=after)
        while True:
            got = False
            resume = {"Last-Event-ID": str(parser.last_id)} if parser.last_id else {}
            try:
                with self._http.stream(
                    "GET", call.url, params=call.parts.params, headers=resume
                ) as response:
                    if response.is_error:
                        raise error_from(response, response.read())
                    for line in response.iter_lines():
                        event = parser.line(line)
                        if event is not None:
                            got = True
                            yield event
                            if event.kind == "finished":
                                return
                        elif line.startswith(":"):
                            yield None
                ended: Exception = StreamEndedError(job_id)
            except httpx.TransportError as err:
                ended = err
            failures = 0 if got else failures + 1
            if failures > self.stream_retries:
                raise ended
            time.sleep(backoff(failures))

    def wait(
        self,
        job_id: str,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        timeout: float | None = None,
        poll: float = 1.0,
    ) -> m.JobReport:
        """The job once finished (succeeded, failed, cancelled or paused by its budget).

        Follows its event stream, calling `on_progress` each time its progress moves; polls
        the job every `poll` seconds instead when no stream is to be had (every stream slot
        taken: 429). Raises TimeoutError after `timeout` seconds (checked at each event, or
        at the server's keep-alive while the job is idle)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.get_job(job_id)
        tracker = Tracker(job, on_progress)
        if not job.status.finished:
            try:
                for event in self._stream(job_id, 0):
                    check_deadline(deadline, job_id)
                    if event is not None:
                        tracker.event(event)
            except (RateLimitError, StreamEndedError, httpx.TransportError):
                pass  # polled below
        while not (job := self.get_job(job_id)).status.finished:
            tracker.job(job)
            check_deadline(deadline, job_id)
            time.sleep(poll)
        tracker.job(job)
        return job
