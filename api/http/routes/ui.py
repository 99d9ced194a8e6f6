"""The graph explorer page at /ui: three static files (api/http/ui/), no key needed to load
them (the page asks for one and sends it with every API call), under a strict CSP."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from core.errors import NotFound

router = APIRouter(prefix="/ui", include_in_schema=False)

STATIC = Path(__file__).parents[1] / "ui"
# The only files served, with their media types: nothing else under the folder is reachable.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# No inline script or style, nothing from another origin; the page talks to this API only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@router.get("")
def ui_root() -> RedirectResponse:
    """/ui -> /ui/ so the page's relative paths resolve under /ui."""
    return RedirectResponse("/ui/", status_code=308)


@router.get("/")
def ui_index() -> FileResponse:
    return _file("index.html")


@router.get("/{name}")
def ui_file(name: str) -> FileResponse:
    return _file(name)


def _file(name: str) -> FileResponse:
    if name not in FILES:
        raise NotFound(f"no file {name!r} under /ui; open /ui/")
    return FileResponse(STATIC / name, media_type=FILES[name], headers=HEADERS)
