"""Checks on RDF text from outside before rdflib sees it: no fetches, no entity expansion.

rdflib fetches JSON-LD `@context` URLs (http: and file:, so a context reveals whether a local
file exists) and expands RDF/XML entities (712 bytes of nested entities burned 60 s). Neither
is needed for an ontology sent with a job, so both are refused here, before any parsing:
- every `@context` must be inline (no string reference, no `@import`);
- RDF/XML may not declare a DOCTYPE or entities;
- the text is at most `ontology_max_bytes`.
Refusals say what to change and never echo a URL, path or library message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.errors import InvalidInput

# A DOCTYPE or ENTITY declaration in any ASCII-compatible or UTF-16/32 encoding (NULs dropped).
_DECLARATION = re.compile(rb"<!\s*(doctype|entity)", re.IGNORECASE)


class UnsafeRdf(InvalidInput):
    """RDF text refused before parsing; the message says what to change."""

    code = "unsafe_rdf"


def check_rdf_text(data: bytes, rdf_format: str, source: str, max_bytes: int) -> None:
    """Refuse oversized text, XML declarations and non-inline JSON-LD contexts (UnsafeRdf)."""
    if len(data) > max_bytes:
        raise UnsafeRdf(
            f"{source} is {len(data)} bytes, above the {max_bytes} allowed for an ontology "
            "(COGMILL_ONTOLOGY_MAX_BYTES)"
        )
    if _DECLARATION.search(data.replace(b"\x00", b"")):
        raise UnsafeRdf(
            f"{source} declares a DOCTYPE or entities, which are not accepted; remove the "
            "<!DOCTYPE ...> and <!ENTITY ...> declarations and write the IRIs out"
        )
    if rdf_format == "json-ld":
        _check_contexts(data, source)


def _check_contexts(data: bytes, source: str) -> None:
    """Every `@context` in the document must be inline: no URL to fetch, no `@import`."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise UnsafeRdf(f"{source} is not valid JSON-LD") from err
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if "@context" in node and _remote(node["@context"]):
                raise UnsafeRdf(
                    f"{source} refers to a remote or file @context, which is not fetched; "
                    "put the context inline in the document"
                )
            stack.extend(node.values())


def _remote(context: Any) -> bool:
    """True when a context value refers to anything outside itself (scoped contexts inside
    it are `@context` keys too, which the document walk checks)."""
    items = context if isinstance(context, list) else [context]
    return any(
        isinstance(item, str) or (isinstance(item, dict) and "@import" in item) for item in items
    )
