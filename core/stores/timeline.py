"""Time spans binned by length, so that "which spans overlap [start, end)" is a few index seeks.

A node has a time when its `start_epoch` / `end_epoch` properties (seconds, end exclusive) are
numbers; either may be missing (an open span: "before 1900", "from 2001"). Overlap is the
question the TEMPORAL retriever asks ("March 2019" must find the Interval 2018 – 2020), and an
index on one value cannot answer it: spans that began long before the window may still reach
into it. Binning by length bounds that: a closed span of bin k is shorter than 4**(k+1)
seconds, so if it overlaps a window starting at `start` it began after `start - 4**(k+1)`.
Each bin is then one range scan on (dataset, type, bin, position) that reads few rows that do
not overlap (those that began in that slack and ended before `start`). Open spans get a bin
each: open at the end, position = start; open at the start, position = end.

Both graph adapters store (bin, position) with each timed node and query bin by bin with
`branches`, then merge with `order_key`, so they return the same nodes in the same order.
(One exception: when more than `limit` spans of one bin start at the same second, which of
them make the cut may differ; Neo4j's seek orders by position alone, to stop at `limit`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.models.graph import Node

START, END = "start_epoch", "end_epoch"
OPEN_START, OPEN_END = -1, -2
# Bin 8 holds spans under 4**9 s (~3 days), bin 12 years, bin 15 centuries; the last bin
# (4**19 s, ~8,700 years and more) has no lower bound on where its spans start.
FIRST_BIN, LAST_BIN = 8, 19
BOUNDS = tuple(4 ** (k + 1) for k in range(FIRST_BIN, LAST_BIN))
BINS = (OPEN_START, OPEN_END, *range(FIRST_BIN, LAST_BIN + 1))


def _number(value: Any) -> int | float | None:
    """A time value, or None for a missing or non-numeric one (bool is not a time)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def span(properties: Mapping[str, Any]) -> tuple[int | float | None, int | float | None] | None:
    """(start, end) of a node's properties, None when it has neither."""
    start, end = _number(properties.get(START)), _number(properties.get(END))
    return None if start is None and end is None else (start, end)


def time_bin(start: float | None, end: float | None) -> int:
    """The bin of a span with at least one end."""
    if start is None:
        return OPEN_START
    if end is None:
        return OPEN_END
    return FIRST_BIN + sum(1 for bound in BOUNDS if bound <= end - start)


def position(start: float | None, end: float | None) -> float:
    """Where a span sits in its bin's index: its start, or (open at the start) its end."""
    return end if start is None else start  # type: ignore[return-value]


def branches(start: int | None, end: int | None) -> list[tuple[int, int | None, int | None]]:
    """(bin, low, high) per bin: the positions (exclusive bounds, None open) that can overlap."""
    found: list[tuple[int, int | None, int | None]] = []
    for k in BINS:
        if k == OPEN_START:
            found.append((k, start, None))
        elif k in (OPEN_END, LAST_BIN) or start is None:
            found.append((k, None, end))
        else:
            found.append((k, start - BOUNDS[k - FIRST_BIN], end))
    return found


def order_key(node: Node) -> tuple:
    """Earliest first: by start (open starts first), then end (open ends last), then id."""
    s, e = span(node.properties) or (None, None)
    return (s is not None, s or 0, e is None, e or 0, node.id)


def check_range(start: int | None, end: int | None, limit: int) -> None:
    """ValueError for an empty range or a negative limit."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if start is not None and end is not None and start >= end:
        raise ValueError(f"the time range is empty: start {start} is not before end {end}")
