"""Helpers over sequences that the stores and the models share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence


def batched(items: Sequence, size: int) -> Iterator[Sequence]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
