"""Request guards run before any route: trusted Host (DNS rebinding), foreign Origin and
browser-form bodies on state-changing routes (cross-site requests), and the body byte cap,
counted on the stream rather than trusted from Content-Length."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.http.errors import (
    BodyTooLarge,
    ForeignOrigin,
    UnsupportedMediaType,
    UntrustedHost,
    error_response,
)
from core.errors import CogmillError
from core.settings import Settings

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
# Content types a browser page may send cross-site without a CORS preflight; multipart is
# taken only by the upload route.
FORM_TYPES = {"application/x-www-form-urlencoded", "text/plain", "multipart/form-data"}
UPLOAD_PATH = re.compile(r"^/api/v1/datasets/[^/]+/data/?$")


def _host_name(host: str) -> str:
    """`example.org:8000` -> `example.org`; `[::1]:8000` -> `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _origin(value: str) -> str:
    parts = urlsplit(value.strip().lower())
    return f"{parts.scheme}://{parts.netloc}"


class RequestGuard:
    """ASGI middleware answering in the one error schema before the app sees the request."""

    def __init__(self, app: ASGIApp, settings: Callable[[], Settings]) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers, settings)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        upload = scope["method"] == "POST" and UPLOAD_PATH.match(scope["path"]) is not None
        limit = settings.max_upload_bytes if upload else settings.api_max_body_bytes
        setting = "COGMILL_MAX_UPLOAD_BYTES" if upload else "COGMILL_API_MAX_BODY_BYTES"
        what = "the upload" if upload else "the request body"
        message = f"{what} is larger than the limit of {limit} bytes; {setting} on the server"
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await error_response(BodyTooLarge(message))(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message_ = await receive()
            if message_["type"] == "http.request":
                received += len(message_.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(message)
            return message_

        await self.app(scope, counted, send)

    def _refusal(
        self, scope: Scope, headers: dict[str, str], settings: Settings
    ) -> CogmillError | None:
        trusted = {name.lower() for name in settings.api_trusted_hosts}
        host = headers.get("host", "")
        if "*" not in trusted and _host_name(host) not in trusted:
            return UntrustedHost(
                "the Host header names a host this server does not serve; use a trusted name "
                "or add it to COGMILL_API_TRUSTED_HOSTS",
            )
        if scope["method"] not in STATE_CHANGING:
            return None
        origin = headers.get("origin")
        if origin is not None:
            allowed = {_origin(o) for o in settings.api_allowed_origins}
            own = {f"{scheme}://{host.strip().lower()}" for scheme in ("http", "https")}
            if _origin(origin) not in allowed | own:
                return ForeignOrigin(
                    "requests that change data are not accepted from another site's page; "
                    "add the origin to COGMILL_API_ALLOWED_ORIGINS to allow it",
                )
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in FORM_TYPES and not (
            kind == "multipart/form-data" and UPLOAD_PATH.match(scope["path"])
        ):
            return UnsupportedMediaType(
                "send a JSON body (Content-Type: application/json), or none",
            )
        return None
