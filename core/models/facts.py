"""The names facts over time are stored under, shared by the writers, the stores and readers.

A fact is a relationship edge between two entities. Its two clocks: world time (when the fact
held: `valid_from`, `valid_to`, every span in `valid_spans`) and system time (when cogmill
learnt it, `recorded_at`, and learnt that it ended, `retired_at`), all derived by the store
from the edge's claims (core/models/graph.py `Claim`, core/stores/fact_intervals.py).

A functional fact (a subject holds one value at a time: CEO of, married to, lives in) carries
its relation group and which end is its subject, set by the pipeline (core/facts/). The values
are stored data: changing one makes existing graphs unreadable.
"""

from __future__ import annotations

from typing import Literal

# Set by the pipeline on a relationship edge.
FACT_GROUP = "fact_group"  # facts of one subject in one group hold one value at a time
FACT_SIDE = "fact_side"  # which end is the subject: "source", "target" or "both"
# A fact that says another one ended ("left", "resigned from", "divorced"): its claims end
# any functional fact between the same two entities, in whichever group.
ENDS_GROUP = "~ends"

# Derived by the store (never written by the pipeline).
VALID_FROM = "valid_from"  # ISO day the latest span began (None: unknown, or always)
VALID_TO = "valid_to"  # ISO day the latest span ended (None: it still holds)
VALID_SPANS = "valid_spans"  # every span, [start day, end day] (days since 1970-01-01, None open)
SUPERSEDED_BY = "superseded_by"  # id of the edge whose start ended the latest span
RECORDED_AT = "recorded_at"  # epoch seconds the store first kept a claim of it
RETIRED_AT = "retired_at"  # epoch seconds the store first kept what ended it (None: current)
DERIVED = (VALID_FROM, VALID_TO, VALID_SPANS, SUPERSEDED_BY, RECORDED_AT, RETIRED_AT)

Side = Literal["source", "target", "both"]
SIDES: tuple[Side, ...] = ("source", "target", "both")
