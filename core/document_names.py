"""Document names from outside made safe to store and show: labels, never paths.

A document name is a label, never a path: uploads over JSON once kept `../`, `/` and NUL in
names, while multipart uploads already took the base name. `document_name` gives every entry
point the same rule.
"""

from __future__ import annotations

import re
import unicodedata

from core.errors import InvalidInput

MAX_DOCUMENT_NAME_CHARS = 255
_SEPARATORS = re.compile(r"[/\\]")


def document_name(raw: str) -> str:
    """The base name of `raw` (after its last / or \\) without control characters, at most
    MAX_DOCUMENT_NAME_CHARS long. ValueError when nothing usable is left."""
    if not isinstance(raw, str):
        raise InvalidInput(f"a document name must be text, got {type(raw).__name__}")
    base = _SEPARATORS.split(raw)[-1]
    # Cc: NUL, line ends, escapes; Cf: invisible format characters (bidi overrides, ...).
    kept = "".join(c for c in base if unicodedata.category(c) not in ("Cc", "Cf")).strip()
    if kept in ("", ".", ".."):
        raise InvalidInput(
            f"document name {raw[:80]!r} has no file name in it; give a name such as "
            "'report.pdf' (without folders)"
        )
    if len(kept) > MAX_DOCUMENT_NAME_CHARS:
        stem, dot, suffix = kept.rpartition(".")
        if dot and 0 < len(suffix) <= 16:
            return stem[: MAX_DOCUMENT_NAME_CHARS - len(suffix) - 1] + "." + suffix
        return kept[:MAX_DOCUMENT_NAME_CHARS]
    return kept
