"""The validity sweep both graph adapters run (core/stores/fact_intervals.py), on its own."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.models.facts import ENDS_GROUP
from core.models.graph import FactClaim
from core.stores.fact_intervals import Fact, partners, subjects, validity
from core.temporal import days_from_civil, iso_day

pytestmark = pytest.mark.unit


def day(year: int, month: int = 1) -> int:
    return days_from_civil(year, month, 1)


def claim(
    doc: str, start: int | None = None, end: int | None = None, at: float = 1.0, weak: bool = False
) -> FactClaim:
    """A claim of document `doc`; `weak`: its day is the document's date."""
    return FactClaim(
        document_id=doc,
        chunk_id=f"{doc}-c",
        start=start,
        end=end,
        recorded_at=at,
        from_document=weak,
    )


def ceo(person: str, *claims: FactClaim, company: str = "holbeck") -> Fact:
    """(person, ceo_of, company): the company holds one CEO at a time."""
    return Fact(f"{person}>{company}", person, company, "ceo", "target", claims)


def spans(props: dict) -> list[tuple[str | None, str | None]]:
    return [
        (iso_day(s) if s is not None else None, iso_day(e) if e else None)
        for s, e in props["valid_spans"]
    ]


def test_a_later_holder_supersedes_the_earlier_one():
    mara, teo = ceo("mara", claim("d1", day(2019))), ceo("teo", claim("d2", day(2023, 3)))
    found = validity([mara, teo], {"holbeck"})
    assert found[mara.id]["valid_from"] == "2019-01-01"
    assert found[mara.id]["valid_to"] == "2023-03-01"
    assert found[mara.id]["superseded_by"] == teo.id
    assert found[teo.id]["valid_to"] is None and found[teo.id]["superseded_by"] is None


def test_without_the_superseding_claim_the_earlier_fact_holds_again():
    mara = ceo("mara", claim("d1", day(2019)))
    assert validity([mara], {"holbeck"})[mara.id]["valid_to"] is None


def test_an_explicit_end_closes_a_span_without_a_successor():
    mara = ceo("mara", claim("d1", day(2019)), claim("d2", None, day(2022)))
    teo = ceo("teo", claim("d3", day(2023)))
    found = validity([mara, teo], {"holbeck"})
    assert spans(found[mara.id]) == [("2019-01-01", "2022-01-01")]
    assert found[mara.id]["superseded_by"] is None


def test_an_end_on_the_successors_first_day_names_the_successor():
    mara = ceo("mara", claim("d1", day(2019)), claim("d2", None, day(2023)))
    teo = ceo("teo", claim("d3", day(2023)))
    assert validity([mara, teo], {"holbeck"})[mara.id]["superseded_by"] == teo.id


def test_a_holder_who_returns_holds_two_spans():
    a = ceo("ann", claim("d1", day(2015)), claim("d3", day(2023)))
    b = ceo("ben", claim("d2", day(2019)))
    found = validity([a, b], {"holbeck"})
    assert spans(found[a.id]) == [("2015-01-01", "2019-01-01"), ("2023-01-01", None)]
    assert found[a.id]["valid_from"] == "2023-01-01" and found[a.id]["valid_to"] is None
    assert spans(found[b.id]) == [("2019-01-01", "2023-01-01")]


def test_later_claims_of_the_holder_extend_its_span():
    mara = ceo("mara", claim("d1", day(2019)), claim("d2", day(2021)))
    assert spans(validity([mara], {"holbeck"})[mara.id]) == [("2019-01-01", None)]


def test_two_holders_starting_on_one_day_hold_together():
    a, b = ceo("ann", claim("d1", day(2020))), ceo("ben", claim("d2", day(2020)))
    found = validity([a, b], {"holbeck"})
    assert found[a.id]["valid_to"] is None and found[b.id]["valid_to"] is None


def test_a_later_documents_restatement_does_not_restart_a_holder_the_text_dates():
    mara = ceo("mara", claim("d1", day(2019)), claim("d4", day(2024), weak=True))
    teo = ceo("teo", claim("d2", day(2023)))
    found = validity([mara, teo], {"holbeck"})
    assert spans(found[mara.id]) == [("2019-01-01", "2023-01-01")]
    assert found[teo.id]["valid_to"] is None


def test_a_holder_known_only_from_document_dates_starts_at_the_first():
    ann = ceo("ann", claim("d1", day(2015)))
    ben = ceo("ben", claim("d2", day(2018), weak=True), claim("d3", day(2020), weak=True))
    found = validity([ann, ben], {"holbeck"})
    assert spans(found[ben.id]) == [("2018-01-01", None)]
    assert found[ann.id]["valid_to"] == "2018-01-01"


def test_undated_claims_are_older_than_dated_ones():
    old, new = ceo("ann", claim("d1")), ceo("ben", claim("d2", day(2019)))
    found = validity([old, new], {"holbeck"})
    assert spans(found[old.id]) == [(None, "2019-01-01")]
    assert found[old.id]["superseded_by"] == new.id


def test_an_undated_claim_does_not_move_a_dated_start():
    mara = ceo("mara", claim("d1", day(2019)), claim("d2"), claim("d3", None, day(2022)))
    assert spans(validity([mara], {"holbeck"})[mara.id]) == [("2019-01-01", "2022-01-01")]


def test_an_ends_fact_closes_the_span_of_the_same_pair_in_any_group():
    job = Fact("jon>altamira", "jon", "altamira", "employer", "source", (claim("d1", day(2015)),))
    left = Fact("jon-left", "jon", "altamira", ENDS_GROUP, "both", (claim("d2", day(2018)),))
    found = validity([job, left], {"jon"})
    assert spans(found[job.id]) == [("2015-01-01", "2018-01-01")]
    assert spans(found[left.id]) == [("2018-01-01", None)]  # swept alone


def test_a_fact_keyed_on_both_ends_holds_where_both_sweeps_say():
    ab = Fact("a-b", "ann", "bob", "spouse", "both", (claim("d1", day(2010)),))
    ac = Fact("a-c", "ann", "cy", "spouse", "both", (claim("d2", day(2020)),))
    facts = [ab, ac]
    assert partners(facts, {"ann"}) == {"bob", "cy"}
    found = validity(facts, {"ann", "bob", "cy"})
    assert spans(found[ab.id]) == [("2010-01-01", "2020-01-01")]
    assert found[ab.id]["superseded_by"] == ac.id
    assert spans(found[ac.id]) == [("2020-01-01", None)]


def test_ungrouped_facts_hold_from_their_earliest_claim():
    fact = Fact("x", "a", "b", claims=(claim("d2", day(2021)), claim("d1", day(2019))))
    assert spans(validity([fact], set())[fact.id]) == [("2019-01-01", None)]
    assert subjects([fact]) == set()


def test_facts_without_claims_or_of_untouched_subjects_get_nothing():
    bare = ceo("mara")
    other = ceo("teo", claim("d1", day(2019)), company="elsewhere")
    assert validity([bare, other], {"holbeck"}) == {}


def test_system_time_records_when_it_was_learnt_and_when_its_end_was():
    mara = ceo("mara", claim("d1", day(2019), at=100.0))
    teo = ceo("teo", claim("d2", day(2023), at=200.0))
    found = validity([mara, teo], {"holbeck"})
    assert (found[mara.id]["recorded_at"], found[mara.id]["retired_at"]) == (100.0, 200.0)
    assert found[teo.id]["retired_at"] is None
    # Learnt after its successor: it was never current in system time.
    late = ceo("mara", claim("d1", day(2019), at=300.0))
    assert validity([late, teo], {"holbeck"})[late.id]["retired_at"] == 300.0


HOLDERS = ("ann", "ben", "cy", "dee")


@st.composite
def histories(draw: st.DrawFn) -> list[Fact]:
    """A company's CEO facts with random claims (some undated, some ending), and ENDS facts."""
    facts = []
    for person in draw(st.lists(st.sampled_from(HOLDERS), min_size=1, max_size=4, unique=True)):
        claims = []
        for n in range(draw(st.integers(1, 3))):
            start = draw(st.none() | st.integers(2000, 2030).map(day))
            end = draw(st.none() | st.integers(2000, 2030).map(day))
            at = float(draw(st.integers(0, 50)))
            weak = draw(st.booleans())
            doc = f"{person}{n}"
            claims.append(claim(doc, start, end, at, weak))
        facts.append(ceo(person, *claims))
        if draw(st.booleans()):
            left = claim(f"{person}-left", day(draw(st.integers(2000, 2030))))
            facts.append(Fact(f"{person}-left", person, "holbeck", ENDS_GROUP, "both", (left,)))
    return facts


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(histories(), st.randoms(use_true_random=False))
def test_the_result_does_not_depend_on_the_order_of_facts_or_claims(facts, rng: random.Random):
    expected = validity(facts, {"holbeck"})
    shuffled = [
        Fact(f.id, f.source, f.target, f.group, f.side, tuple(rng.sample(f.claims, len(f.claims))))
        for f in rng.sample(facts, len(facts))
    ]
    assert validity(shuffled, {"holbeck"}) == expected


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(histories())
def test_spans_are_ordered_and_do_not_overlap(facts):
    for props in validity(facts, {"holbeck"}).values():
        bounds = [(s if s is not None else -(10**9), e) for s, e in props["valid_spans"]]
        for (s1, e1), (s2, _) in zip(bounds, bounds[1:], strict=False):
            assert e1 is not None and s1 < e1 <= s2
