"""How a search sees facts (retrieval/fact_view.py), and the bounds on the times it is given."""

from __future__ import annotations

import pytest

from core.facts.when import MAX_CHARS, document_day, parse_date, parse_moment
from core.temporal import days_from_civil
from retrieval.fact_view import DEMOTE, FactView

pytestmark = pytest.mark.unit


def day(year: int, month: int = 1) -> int:
    return days_from_civil(year, month, 1)


def fact(*spans: tuple[int | None, int | None], group: str = "ceo", **props) -> dict:
    return {
        "valid_spans": [list(s) for s in spans],
        "fact_group": group,
        "recorded_at": 100.0,
        **props,
    }


MARA = fact((day(2019), day(2023)), superseded_by="teo", retired_at=200.0)
TEO = fact((day(2023), None), recorded_at=200.0)


def test_current_facts_hold_and_superseded_ones_are_demoted():
    view = FactView()
    assert view.weight(TEO) == 1.0 and view.weight(MARA) == DEMOTE
    assert view.label(TEO) == " [since 2023-01-01]"
    assert view.label(MARA) == " [2019-01-01 – 2023-01-01, superseded]"


def test_as_of_a_past_time_the_then_current_fact_holds():
    view = FactView.parse(as_of="2020")
    assert view.weight(MARA) == 1.0 and view.weight(TEO) == DEMOTE
    assert view.asked == {"as_of": "2020"}


def test_a_window_the_fact_covers_in_part_weighs_in_proportion():
    view = FactView.parse(as_of="between 2022 and 2023")  # 2022-01-01 .. 2024-01-01
    assert DEMOTE < view.weight(MARA) < 1.0 and DEMOTE < view.weight(TEO) < 1.0


def test_known_at_leaves_out_what_was_not_recorded_and_an_end_learnt_later():
    view = FactView(known_at=150.0)
    assert view.weight(TEO) == 0.0  # recorded at 200
    assert view.weight(MARA) == 1.0  # its end was learnt at 200: then it was current
    assert view.label(MARA) == " [since 2019-01-01]"


def test_facts_in_no_group_hold_unless_they_ended():
    said = fact((day(2024), None), group="")  # dated by its document only
    assert FactView.parse(as_of="2010").weight(said) == 1.0
    ended = fact((day(2001), day(2005)), group="")
    assert FactView.parse(as_of="2010").weight(ended) == DEMOTE


def test_edges_without_validity_are_untouched():
    assert FactView().weight({"description": "x"}) == 1.0
    assert FactView().label({"description": "x"}) == ""


@pytest.mark.parametrize("bad", ["", "   ", "x" * (MAX_CHARS + 1), "banana", "2019" * 17])
def test_times_from_outside_are_bounded_and_checked(bad):
    with pytest.raises(ValueError, match="as_of"):
        FactView.parse(as_of=bad)
    with pytest.raises(ValueError, match="known_at"):
        FactView.parse(known_at=bad)
    with pytest.raises(ValueError, match="document date"):
        document_day(bad)


def test_times_read():
    assert parse_date("March 2019").start == day(2019, 3)
    assert document_day("2023") == "2023-01-01"
    assert parse_moment("2026-12-07") == parse_moment("2026-12-07T23:59:59.999999Z")
    assert parse_moment("2026-12-07T10:00:00+00:00") == 1796637600.0
