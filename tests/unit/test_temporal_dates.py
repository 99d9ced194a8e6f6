"""Date expressions become [start, end) day intervals with an explicit granularity."""

from __future__ import annotations

from datetime import date

import pytest

from core.models.extraction import ExtractedEntity, KnowledgeGraph
from core.models.vocabulary import AT, DURING, INVOLVES
from core.temporal import (
    Granularity,
    TimeSpan,
    civil_from_days,
    days_from_civil,
    iso_day,
    span_of,
)
from core.time_expressions import find_spans, parse_time
from pipelines.graph_builder import build_graph
from pipelines.models import Chunk, ExtractedEvent

NOW = date(2026, 11, 30)


def bounds(span: TimeSpan | None) -> tuple[str | None, str | None, str]:
    """(first day, exclusive end day, granularity) as ISO strings, for readable asserts."""
    assert span is not None
    start = None if span.start is None else iso_day(span.start)
    end = None if span.end is None else iso_day(span.end)
    return start, end, span.granularity.value


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("March 2019", ("2019-03-01", "2019-04-01", "month")),
        ("2019-03-11", ("2019-03-11", "2019-03-12", "day")),
        ("in the 1990s", ("1990-01-01", "2000-01-01", "decade")),
        ("2019年3月", ("2019-03-01", "2019-04-01", "month")),
        ("2019年", ("2019-01-01", "2020-01-01", "year")),
        ("2019年3月11日", ("2019-03-11", "2019-03-12", "day")),
        ("1990年代", ("1990-01-01", "2000-01-01", "decade")),
        ("between 1910 and 1920", ("1910-01-01", "1921-01-01", "year")),
        ("from 1939 to 1945", ("1939-01-01", "1946-01-01", "year")),
        ("1914–18", ("1914-01-01", "1919-01-01", "year")),
        ("before March 2019", (None, "2019-03-01", "month")),
        ("after 2001", ("2002-01-01", None, "year")),
        ("since 2001", ("2001-01-01", None, "year")),
        ("the 19th century", ("1800-01-01", "1900-01-01", "century")),
        ("June 5, 1944", ("1944-06-05", "1944-06-06", "day")),
        ("5th of June 1944", ("1944-06-05", "1944-06-06", "day")),
        ("Sept. 2001", ("2001-09-01", "2001-10-01", "month")),
        ("in 2016", ("2016-01-01", "2017-01-01", "year")),
        ("44 BC", ("-0043-01-01", "-0042-01-01", "year")),
        ("5 juin 2016", ("2016-06-05", "2016-06-06", "day")),  # dateparser's languages
        ("last 30 days", ("2026-11-01", "2026-12-01", "day")),
        ("last year", ("2025-01-01", "2026-01-01", "year")),
        ("yesterday", ("2026-11-29", "2026-11-30", "day")),
    ],
)
def test_expressions_normalise_to_intervals(
    expression: str, expected: tuple[str | None, str | None, str]
) -> None:
    assert bounds(parse_time(expression, now=NOW)) == expected


def test_a_lone_year_is_a_year_not_a_guessed_day() -> None:
    span = parse_time("2019")
    assert bounds(span) == ("2019-01-01", "2020-01-01", "year")
    assert span is not None and span.label == "2019" and span.is_point


@pytest.mark.parametrize("text", ["", "every summer", "two days later", "March", "42"])
def test_text_without_a_date_gives_none(text: str) -> None:
    assert parse_time(text, now=NOW) is None


def test_relative_expressions_need_a_reference_day() -> None:
    assert parse_time("last 30 days") is None  # documents: relative to an unknown day
    assert parse_time("last 30 days", now=NOW) is not None  # questions: relative to today


def test_running_text_keeps_bare_numbers_that_are_not_years() -> None:
    text = "In 2016 the firm had 2000 employees and 1500 customers."
    assert [s.label for s in find_spans(text)] == ["2016"]
    assert [s.label for s in find_spans("2000 employees", bare_years=True)] == ["2000"]


def test_two_dates_in_a_question_are_two_windows() -> None:
    labels = [s.label for s in find_spans("what happened in 2016 and in 2018?", bare_years=True)]
    assert labels == ["2016", "2018"]


def test_day_numbers_round_trip_across_eras() -> None:
    for year, month, day in [(1970, 1, 1), (2000, 2, 29), (-43, 3, 15), (0, 12, 31), (9999, 1, 1)]:
        assert civil_from_days(days_from_civil(year, month, day)) == (year, month, day)
    assert days_from_civil(1970, 1, 1) == 0
    assert days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28) == 2  # leap year
    assert day_of("2019-02-29") is None  # not a day


def day_of(text: str) -> TimeSpan | None:
    spans = find_spans(text, bare_years=True)
    return spans[0] if spans and spans[0].granularity is Granularity.DAY else None


def test_overlap_and_fit() -> None:
    decade = parse_time("the 1990s")
    year, other = parse_time("1995"), parse_time("2016")
    before = parse_time("before 1991")
    assert decade and year and other and before
    assert year.overlaps(decade) and not other.overlaps(decade)
    assert year.fraction_within(decade) == 1.0
    assert decade.fraction_within(year) == pytest.approx(365 / 3652, rel=0.01)
    assert before.overlaps(decade) and not before.overlaps(other)
    assert 0 < before.fraction_within(decade) <= 0.1


def test_events_become_time_nodes_with_sortable_values() -> None:
    chunk = Chunk(id="c1", document_id="d1", document_name="a.md", index=0, text="t", token_count=1)
    graph = KnowledgeGraph(
        entities=[
            ExtractedEntity(name="Acme Corp", type="Organization"),
            ExtractedEntity(name="March 2019", type="Date"),
        ]
    )
    founded = parse_time("March 2019")
    war = parse_time("from 1939 to 1945")
    assert founded and war
    events = [
        ExtractedEvent(text="Acme Corp was founded in March 2019.", when=founded),
        ExtractedEvent(text="The war lasted from 1939 to 1945.", when=war),
    ]
    built = build_graph("ds", [chunk], [graph], events=[events])
    by_type = {n.type: n for n in built.nodes.values() if n.type in ("Timestamp", "Interval")}
    assert by_type["Timestamp"].properties["time"] == "2019-03-01"
    assert by_type["Interval"].properties["start"] == "1939-01-01"
    assert by_type["Interval"].properties["end"] == "1946-01-01"
    names = {
        (e.name, built.nodes[e.target].type)
        for e in built.edges.values()
        if e.name in (AT, DURING, INVOLVES)
    }
    # The date entity is the event's time, not a participant.
    assert names == {(AT, "Timestamp"), (DURING, "Interval"), (INVOLVES, "Entity")}
    event_nodes = sorted(
        (n for n in built.nodes.values() if n.type == "Event"), key=lambda n: n.properties["epoch"]
    )
    assert [n.properties["label"] for n in event_nodes] == ["1939 – 1945", "2019-03"]
    assert span_of(event_nodes[1]) == founded.model_copy(update={"text": ""})
    assert {i.text for i in built.to_embed["Event_text"]} == {e.text for e in events}
