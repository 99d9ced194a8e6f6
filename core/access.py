"""Who a request acts for: a Caller (tenant and role) and how it names stored datasets.

A tenant's dataset `docs` is stored as `<tenant>:docs`; the local default tenant (the embedded
CLI, an API without keys) stores bare names. Every service scopes names through a Caller, so no
store ever sees a name the caller did not own. Keys and tenants themselves are
api/services/tenants.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from core.errors import Forbidden
from core.models.jobs import Job

J = TypeVar("J", bound=Job)


class AccessDeniedError(Forbidden):
    """The caller's role may not do this."""


class Role(StrEnum):
    """What a key may do, each role including the ones before it."""

    READER = "reader"  # search, recall, list, show, export
    WRITER = "writer"  # + add, cognify, delete, remember, improve, forget, cancel
    ADMIN = "admin"  # + CYPHER and NATURAL_LANGUAGE queries

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


@dataclass(frozen=True)
class Caller:
    """Who a request acts for: its tenant (None: the local default tenant, bare dataset names)
    and role."""

    tenant: str | None
    role: Role

    def scoped(self, name: str) -> str:
        """The stored name of this caller's dataset `name`."""
        return name if self.tenant is None else f"{self.tenant}:{name}"

    def owns(self, stored: str) -> bool:
        """Whether a stored (scoped) dataset name belongs to this caller."""
        if self.tenant is None:
            return ":" not in stored
        return stored.startswith(f"{self.tenant}:")

    def unscoped(self, stored: str) -> str:
        """The name this caller knows a stored dataset by."""
        return stored if self.tenant is None else stored.removeprefix(f"{self.tenant}:")

    def unscoped_text(self, message: str) -> str:
        """Free text (a note, an error message) with every stored name of this caller's
        written as the caller writes it: `<tenant>:` dropped where it starts a name."""
        if self.tenant is None or not message:
            return message
        # Where a stored name starts: not inside a longer word, and a name follows the ':'.
        start = rf"(?<![A-Za-z0-9_\-]){re.escape(self.tenant)}:(?=[A-Za-z0-9])"
        return re.sub(start, "", message)

    def unscoped_job(self, record: J) -> J:
        """A job record (or report) with its dataset, message and errors as this caller
        names them."""
        if self.tenant is None:
            return record
        errors = [
            e.model_copy(update={"message": self.unscoped_text(e.message)}) for e in record.errors
        ]
        dataset, message = self.unscoped(record.dataset), self.unscoped_text(record.message)
        return record.model_copy(update={"dataset": dataset, "message": message, "errors": errors})


LOCAL = Caller(None, Role.ADMIN)
"""The embedded CLI and an API without keys: the local default tenant, every right."""
