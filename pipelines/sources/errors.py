"""What a sync's source can get wrong."""

from __future__ import annotations

from core.access import AccessDeniedError
from core.errors import InvalidInput


class SourceError(InvalidInput):
    """The source cannot be read as asked (missing, unreachable, over a bound, malformed); the
    message says what is wrong and what to do."""

    code = "invalid_source"


class SourceAccessError(AccessDeniedError):
    """The caller may not have the server read this source (a path outside COGMILL_SYNC_ROOTS,
    a private network address, a git URL scheme that is not allowed)."""

    code = "source_forbidden"
