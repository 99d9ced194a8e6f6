"""Settings: the HTTP API's access and bounds, webhooks and metrics, sync and schedules.

One part of `Settings` (core/settings/__init__.py); each field maps to `COGMILL_<FIELD>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class ApiSettings(BaseModel):
    """The HTTP API's access and bounds, webhooks and metrics, sync and schedules."""

    # API
    # API access (core/access.py): auto requires a key once any key was created; required
    # always does (and lets `cogmill serve` bind a non-loopback host).
    auth: Literal["auto", "required"] = "auto"

    # Requests per minute per API key (a fixed one-minute window in the state store: Redis in
    # distributed mode, so all API processes share it; 0 = unlimited), and wrong secrets per
    # minute per key id and per client address (counted before the key's hash). Over: 429.
    api_requests_per_minute: int = Field(default=0, ge=0)
    api_auth_failures_per_minute: int = Field(default=20, ge=1)
    # Bytes of documents a tenant (an API key's) may store over all its datasets; 0 = no quota.
    tenant_storage_bytes: int = Field(default=0, ge=0)

    # Request bounds (413/422 over them). A request body other than an upload; all files of
    # one upload together (each file also under max_file_bytes); characters of a query
    # (search, route, recall); datasets named in one request.
    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    max_upload_bytes: int = Field(default=512 * 1024 * 1024, ge=1)
    api_max_query_chars: int = Field(default=4096, ge=1)
    api_max_datasets: int = Field(default=100, ge=1)

    # Host header names served (DNS rebinding: anything else is a 400); "*" serves any.
    api_trusted_hosts: list[str] = ["localhost", "127.0.0.1", "::1", "testserver"]

    # Browser origins (scheme://host[:port]) allowed to POST/PUT/PATCH/DELETE besides the
    # API's own; a request with another Origin header is a 403.
    api_allowed_origins: list[str] = []

    # Job event streams (GET /api/v1/jobs/{id}/events) open at once in one API process, per API
    # key and in all (429 over them; callers without a key share only the total); a stream
    # ends after max_seconds (EventSource clients reconnect with Last-Event-ID) and sends a
    # comment line after heartbeat_seconds without an event, so proxies keep it open.
    api_max_streams_per_key: int = Field(default=4, ge=1)
    api_max_streams: int = Field(default=64, ge=1)
    api_stream_max_seconds: float = Field(default=3600.0, gt=0)
    api_stream_heartbeat_seconds: float = Field(default=15.0, gt=0, le=300)

    # Seconds `cogmill serve` keeps an idle HTTP connection open for the client's next
    # request. Longer than clients keep idle connections (httpx 5 s, aiohttp 15 s, a load
    # balancer's 60 s), or a request sent as the server closes one is reset.
    api_keep_alive_seconds: int = Field(default=65, ge=1, le=3600)

    # Connections `cogmill serve` holds (api/http/connections.py): a request's head must
    # arrive within head_timeout_seconds (408 and closed otherwise), and its body may pause
    # for at most body_idle_seconds (closed otherwise); at most max_connections
    # open in all and max_connections_per_client from one address (0: no such cap; a proxy in
    # front is one address), 503 over them.
    api_head_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    api_body_idle_seconds: float = Field(default=30.0, gt=0, le=600)
    api_max_connections: int = Field(default=1000, ge=1)
    api_max_connections_per_client: int = Field(default=256, ge=0)

    # Webhooks and metrics
    # Webhooks (workers/webhooks/): allow URLs resolving to loopback/private/link-local
    # addresses (off: refused at registration and at each delivery); per-attempt timeout;
    # retries double from backoff_seconds up to backoff_max_seconds (kept under half the
    # visibility timeout) for retry_seconds after the first attempt.
    webhook_allow_private: bool = False
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    webhook_backoff_seconds: float = Field(default=10.0, gt=0)
    webhook_backoff_max_seconds: float = Field(default=1800.0, gt=0)
    webhook_retry_seconds: float = Field(default=86_400.0, ge=0)
    # GET /metrics also answers a request bearing this token with the whole deployment's figures.
    metrics_token: str | None = None
    # Sync (`cogmill sync`, pipelines/sources/): bounds on what a source may hold and ask for.
    sync_max_files: int = Field(default=100_000, ge=1)
    sync_max_globs: int = Field(default=64, ge=0, le=10_000)
    sync_max_glob_chars: int = Field(default=256, ge=1, le=4096)
    sync_max_path_chars: int = Field(default=1024, ge=1, le=4096)
    # Folders on the server's disk that HTTP and MCP-over-HTTP callers may sync (folders, local
    # git repositories, SQLite files): the local tenant anywhere below a root, a tenant only
    # below <root>/<tenant>. Empty: none (the CLI and MCP over stdio may read any path).
    sync_roots: list[Path] = []
    # Network sources asked for over HTTP may resolve to private addresses (off: refused).
    sync_allow_private: bool = False
    sync_git_schemes: list[str] = ["https", "ssh"]
    sync_git_timeout_seconds: float = Field(default=600.0, gt=0)
    sync_sql_max_tables: int = Field(default=200, ge=1)
    sync_sql_max_rows: int = Field(default=1_000_000, ge=1, description="Rows per SQL table")
    # A sync's source phase renews a lease every third of this; unrenewed for this long, its
    # worker is taken as dead and the phase is run again (workers/sync.py).
    sync_lease_seconds: float = Field(default=30.0, gt=0)
    # Schedules (`cogmill schedules`, workers/schedules.py) and the beat that fires them.
    schedule_min_seconds: float = Field(default=60.0, gt=0)
    schedules_per_tenant: int = Field(default=20, ge=0)
    beat_tick_seconds: float = Field(default=1.0, gt=0, le=60)
    beat_lock_seconds: float = Field(default=15.0, gt=0)
