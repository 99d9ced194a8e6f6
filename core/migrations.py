"""One-time moves of what older versions kept in the state store."""

from __future__ import annotations

from collections.abc import Callable

from core.ports import StateStore


def once(state: StateStore, marker: str, work: Callable[[], None]) -> None:
    """Run `work` unless `marker` is set in `state`, then set it (each run must be safe to
    repeat: two processes may both run it before either sets the marker)."""
    if not state.get(marker):
        work()
        state.put(marker, "1")
