"""Offline facts over time: functional relations by name, and claims read from sentences."""

from __future__ import annotations

import pytest

from core.facts.claims import MAX_TEXT, Bounds, claim_bounds
from core.facts.functional import Functional, FunctionalRelations, ends
from core.temporal import days_from_civil

pytestmark = pytest.mark.unit

DOC = days_from_civil(2024, 5, 1)


def day(year: int, month: int = 1) -> int:
    return days_from_civil(year, month, 1)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ceo_of", Functional("ceo", "target")),
        ("chief_executive_officer_of", Functional("ceo", "target")),
        ("CEO_OF", Functional("ceo", "target")),
        ("president_of", Functional("president", "target")),
        ("works_for", Functional("employer", "source")),
        ("employed_by", Functional("employer", "source")),
        ("employee_of", Functional("employer", "source")),
        ("hired", Functional("employer", "target")),
        ("engineer_at", Functional("employer", "source")),
        ("livesIn", Functional("residence", "source")),
        ("moved_to", Functional("residence", "source")),
        ("headquartered_in", Functional("residence", "source")),
        ("married_to", Functional("spouse", "both")),
        ("wife_of", Functional("spouse", "both")),
        ("capital_of", Functional("capital", "target")),
        ("vice_president_of", None),
        ("related_to", None),
        ("born_in", None),
        ("founded", None),
    ],
)
def test_default_functional_relations_by_their_words(name, expected):
    assert FunctionalRelations().of(name) == expected


def test_declared_relations_come_first_and_defaults_can_be_off():
    declared = FunctionalRelations({"Owns Brand": "source"})
    assert declared.of("owns_brand") == Functional("declared:owns brand", "source")
    assert declared.of("ceo_of") == Functional("ceo", "target")
    off = FunctionalRelations(defaults=False)
    assert off.of("ceo_of") is None and not off.ending("left")


@pytest.mark.parametrize("name", ["left", "resigned_from", "divorced", "stepped_down_as"])
def test_relations_that_end_facts(name):
    assert ends(name) and FunctionalRelations().of(name) is None


@pytest.mark.parametrize(
    ("text", "relation", "source", "target", "expected"),
    [
        (
            "Mara Quist became CEO of Holbeck Foods in 2019.",
            "ceo_of",
            "Mara Quist",
            "Holbeck Foods",
            Bounds(start=day(2019)),
        ),
        (
            "Teo Varga succeeded Mara Quist as CEO of Holbeck Foods in March 2023.",
            "ceo_of",
            "Teo Varga",
            "Holbeck Foods",
            Bounds(start=day(2023, 3)),
        ),
        (
            "The former CEO of Holbeck Foods, Mara Quist, now advises startups.",
            "ceo_of",
            "Mara Quist",
            "Holbeck Foods",
            Bounds(end=DOC, from_document=True),
        ),
        (
            "Mara Quist stepped down as CEO of Holbeck Foods in 2021.",
            "ceo_of",
            "Mara Quist",
            "Holbeck Foods",
            Bounds(end=day(2021)),
        ),
        (
            "Mara Quist was CEO of Holbeck Foods until 2021.",
            "ceo_of",
            "Mara Quist",
            "Holbeck Foods",
            Bounds(end=day(2022)),
        ),
        (
            "Mara Quist was CEO of Holbeck Foods from 2019 to 2021.",
            "ceo_of",
            "Mara Quist",
            "Holbeck Foods",
            Bounds(day(2019), day(2022)),
        ),
        (
            "In 2018 Jon Berg left Altamira Bank and joined Corvel Systems in 2019.",
            "joined",
            "Jon Berg",
            "Corvel Systems",
            Bounds(start=day(2019)),
        ),
        (
            "In 2019, Mara Quist became CEO of Holbeck Foods, a firm founded in 1950.",
            "ceo_of",
            "Mara Quist",
            "Holbeck Foods",
            Bounds(start=day(2019)),
        ),
        (
            "Jon Berg lives in Porto.",
            "live_in",
            "Jon Berg",
            "Porto",
            Bounds(start=DOC, from_document=True),
        ),
    ],
)
def test_claims_from_sentences(text, relation, source, target, expected):
    assert claim_bounds(text, relation, source, target, DOC) == expected


def test_a_fact_that_ends_another_is_dated_by_its_own_date():
    text = "In 2018 Jon Berg left Altamira Bank and joined Corvel Systems in 2019."
    bounds = claim_bounds(text, "left", "Jon Berg", "Altamira Bank", DOC, ends_fact=True)
    assert bounds == Bounds(start=day(2018))


def test_without_any_date_a_claim_is_undated():
    found = claim_bounds("Jon Berg lives in Porto.", "live_in", "Jon Berg", "Porto", None)
    assert found == Bounds()


def test_only_the_first_characters_of_a_long_text_are_read():
    text = "x " * MAX_TEXT + "Mara became CEO of Holbeck in 2019."
    assert claim_bounds(text, "ceo_of", "Mara", "Holbeck", None) == Bounds()
