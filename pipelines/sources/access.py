"""Which sources a caller may have the server read.

The CLI and MCP over stdio act as the user who runs them: any folder, repository or database
they can reach. A caller over HTTP (or MCP over HTTP) acts on the server's behalf, so a source
on the server's disk (a folder, a local repository, a SQLite file) must be inside one of
COGMILL_SYNC_ROOTS (a tenant's: inside `<root>/<tenant>`), and a network source must resolve to
public addresses unless COGMILL_SYNC_ALLOW_PRIVATE is set. Everyone's git URLs must use a
scheme of COGMILL_SYNC_GIT_SCHEMES (a local repository: `file`).
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

from core.settings import Settings
from pipelines.sources.errors import SourceAccessError, SourceError
from pipelines.sources.git import url_scheme
from pipelines.sources.spec import SourceKind, SourceSpec


def check_access(spec: SourceSpec, settings: Settings, tenant: str | None, remote: bool) -> None:
    """Raise SourceAccessError when the caller may not have this source read, SourceError
    when its location cannot be understood."""
    local = _local_path(spec)
    if spec.kind is SourceKind.GIT:
        scheme = url_scheme(spec.location)
        allowed = [*settings.sync_git_schemes, "file"] if local else settings.sync_git_schemes
        if scheme not in allowed or (scheme == "file" and not local):
            raise SourceAccessError(
                f"git URLs with scheme {scheme!r} are not allowed; use one of "
                f"{', '.join(settings.sync_git_schemes)} (COGMILL_SYNC_GIT_SCHEMES) or a local path"
            )
    if not remote:
        return
    if local is not None:
        _check_root(local, settings, tenant)
    elif not settings.sync_allow_private:
        _check_public(_host(spec))


def _local_path(spec: SourceSpec) -> Path | None:
    """The file or folder on this machine a source reads, if it is one."""
    if spec.kind is SourceKind.SQL:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(spec.location)
        except ArgumentError as err:
            raise SourceError(f"{err}; give a SQLAlchemy URL such as sqlite:///shop.db") from None
        if url.get_backend_name() != "sqlite":
            return None
        return Path(url.database or ":memory:")
    if spec.location.startswith("file://"):
        return Path(spec.location.removeprefix("file://"))
    return Path(spec.location) if spec.location.startswith("/") else None


def _check_root(path: Path, settings: Settings, tenant: str | None) -> None:
    real = path.resolve()
    roots = [root.resolve() / tenant if tenant else root.resolve() for root in settings.sync_roots]
    if not any(real == root or root in real.parents for root in roots):
        where = f"<root>/{tenant}" if tenant else "a root"
        raise SourceAccessError(
            f"{path} is not inside {where} of COGMILL_SYNC_ROOTS, the folders this server syncs "
            "from for API callers; ask its operator, or sync from the command line"
        )


def _host(spec: SourceSpec) -> str:
    if spec.kind is SourceKind.SQL:
        from sqlalchemy.engine import make_url

        return make_url(spec.location).host or ""
    if "://" in spec.location:
        rest = spec.location.split("://", 1)[1].split("/", 1)[0]
    else:  # scp-like user@host:path
        rest = spec.location.split(":", 1)[0]
    host = rest.rsplit("@", 1)[-1]
    return host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":", 1)[0]


def _check_public(host: str) -> None:
    if not host:
        raise SourceAccessError("the source URL names no host")
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError as err:
        raise SourceError(f"cannot resolve {host!r}: {err}") from err
    for info in infos:
        ip = ipaddress.ip_address(info[4][0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if not ip.is_global:
            raise SourceAccessError(
                f"{host} resolves to {ip}, a private address; set COGMILL_SYNC_ALLOW_PRIVATE=true "
                "to let API callers sync from private networks"
            )
