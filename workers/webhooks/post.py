"""One signed webhook POST: the URL guard, the signature, and a bounded HTTP exchange.

Only http(s) URLs are accepted, and every address the host resolves to must be public unless
`webhook_allow_private` is set. The check runs when a URL is registered and again before each
delivery, and the request goes to the address that was checked (a DNS answer that changes in
between, "DNS rebinding", cannot point a delivery at an internal service). Redirects are not
followed and at most `RESPONSE_BYTES` of a reply are read.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.errors import InvalidInput

RESPONSE_BYTES = 4096
SIGNATURE_HEADER = "X-Cogmill-Signature"
ALLOW_HINT = "set COGMILL_WEBHOOK_ALLOW_PRIVATE=true to allow private addresses"


class WebhookError(InvalidInput):
    """A webhook URL that may not be used (not http(s), unresolvable, or a private address)."""

    code = "invalid_webhook"


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (`address`) and what to ask for."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


@dataclass(frozen=True)
class Reply:
    """How a delivery attempt went: the HTTP status (None: no answer) and what went wrong."""

    status: int | None
    error: str
    ms: float

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def _forbidden(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why a delivery may not go to this address (None: it may)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for reason, hit in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved or ip.is_unspecified),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
    ):
        if hit:
            return reason
    return None


def check_url(url: str, *, allow_private: bool) -> Target:
    """The URL's target, resolved and checked; WebhookError says what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise WebhookError(f"invalid webhook URL {url!r}: {err}") from err
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookError(f"webhook URL {url!r} must be http:// or https:// with a host name")
    if parts.username or parts.password:
        raise WebhookError("a webhook URL may not carry credentials; verify the signature instead")
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, ValueError) as err:  # ValueError: not encodable (IDNA, NUL)
        raise WebhookError(f"cannot resolve webhook host {parts.hostname!r}: {err}") from err
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private:
        for address in addresses:
            reason = _forbidden(ipaddress.ip_address(address.split("%")[0]))
            if reason:
                raise WebhookError(
                    f"webhook host {parts.hostname!r} resolves to {address}, a {reason} "
                    f"address; use a public URL, or {ALLOW_HINT}"
                )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, addresses[0])


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The `X-Cogmill-Signature` value: HMAC-SHA256 over `timestamp + "." + body`."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> Reply:
    """POST `body` to the checked target's address (never another one the name resolves to
    later); a Reply, never an exception, for anything the network or the receiver does."""
    started = time.perf_counter()
    try:
        status = _exchange(target, body, headers, timeout)
        error = "" if 200 <= status < 300 else f"HTTP {status}"
        if 300 <= status < 400:
            error += " (redirects are not followed)"
        return Reply(status, error, (time.perf_counter() - started) * 1000)
    except (OSError, http.client.HTTPException) as err:
        text = str(err) or type(err).__name__
        return Reply(None, text, (time.perf_counter() - started) * 1000)


def _exchange(target: Target, body: bytes, headers: dict[str, str], timeout: float) -> int:
    sock = socket.create_connection((target.address, target.port), timeout=timeout)
    conn: http.client.HTTPConnection
    try:
        if target.scheme == "https":
            # Certificate and SNI for the host name, while connected to the checked address.
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
            conn = http.client.HTTPSConnection(target.host, target.port, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
        conn.sock = sock  # already connected: http.client sends on it and never resolves again
        conn.request("POST", target.path, body=body, headers=headers)
        response = conn.getresponse()
        response.read(RESPONSE_BYTES)
        return response.status
    finally:
        sock.close()
