"""Who the request's API key is: its role, so a page offers only what the key may do."""

from __future__ import annotations

from fastapi import APIRouter

from api.http.deps import Reader
from api.http.schemas import Identity, error_responses

router = APIRouter(prefix="/api/v1", tags=["access"])


@router.get("/me", response_model=Identity, responses=error_responses(503))
def me(caller: Reader) -> Identity:
    """The role of the request's API key (admin when the server takes no keys). The tenant is
    not named: a key never sees tenant ids."""
    return Identity(role=caller.role.value)
