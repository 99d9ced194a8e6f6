"""Alias rules: which names denote the same entity, and which name a group is stored under."""

from __future__ import annotations

import itertools

import pytest

from core.aliases import (
    canonical_name,
    group_names,
    match_keys,
    resolution_key,
    same_entity,
    strip_affixes,
)
from pipelines.summarize_documents import extractive_summary


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("NYC", "New York City"),
        ("N.Y.C.", "NYC"),
        ("U.S.", "United States"),
        ("USA", "United States of America"),
        ("Prof. Maria Lopez", "Maria Lopez"),
        ("Dr. Maria Lopez", "Prof. Maria Lopez"),
        ("M. Lopez", "Maria Lopez"),
        ("J. R. R. Tolkien", "John Ronald Reuel Tolkien"),
        ("J.R.R. Tolkien", "John Ronald Reuel Tolkien"),
        ("Acme Inc.", "Acme"),
        ("Lopez, Maria", "Maria Lopez"),
        ("José López", "Jose Lopez"),
    ],
)
def test_aliases_of_one_entity_match_both_ways(a: str, b: str) -> None:
    assert same_entity(a, b) and same_entity(b, a)
    # The key index finds every pair a rule accepts, whichever of the two is filed first.
    assert match_keys(a).sought & match_keys(b).filed
    assert match_keys(b).sought & match_keys(a).filed


def test_match_keys_find_every_pair_a_rule_accepts_in_a_crowd_of_names() -> None:
    names = [
        "Maria Lopez",
        "M. Lopez",
        "Carlos Lopez",
        "Prof. Maria Lopez",
        "Lopez, Maria",
        "ML",
        "New York City",
        "NYC",
        "N.Y.C.",
        "New York",
        "NY",
        "United States",
        "U.S.",
        "USA",
        "United States of America",
        "J. R. R. Tolkien",
        "John Ronald Reuel Tolkien",
        "Acme",
        "Acme Inc.",
        "José López",
        "Jose Lopez",
        "Lopez",
        "C. Lopez",
        "Tolkien",
    ]
    index: dict[str, set[str]] = {}
    for name in names:
        for key in match_keys(name).filed:
            index.setdefault(key, set()).add(name)
    found = {a: set().union(*(index.get(k, set()) for k in match_keys(a).sought)) for a in names}
    for a, b in itertools.permutations(names, 2):
        assert not same_entity(a, b) or b in found[a], (a, b)
    # The keys narrow: a full name finds only names it could be, and the abbreviations that
    # could stand for it; never the other people of its surname or the other "N... Y... C...".
    assert found["Maria Lopez"] == {
        "Maria Lopez",
        "Prof. Maria Lopez",
        "Lopez, Maria",
        "M. Lopez",
        "C. Lopez",
        "ML",
    }
    assert found["New York City"] == {"New York City", "NYC", "N.Y.C."}
    assert found["M. Lopez"] >= {"Maria Lopez", "Carlos Lopez", "C. Lopez"}  # it fits several


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Maria Lopez", "Carlos Lopez"),  # two people sharing a surname
        ("M. Lopez", "Carlos Lopez"),  # the initial does not fit
        ("NYC", "New York"),  # the acronym has a letter more
        ("Maria Lopez", "Maria Lopez-Garcia"),
        ("Lopez", "Maria Lopez"),  # a bare surname may be anyone of that name
        ("J. Tolkien", "John Ronald Reuel Tolkien"),
        ("Dr.", "Prof."),
    ],
)
def test_different_entities_do_not_match(a: str, b: str) -> None:
    assert not same_entity(a, b) and not same_entity(b, a)


def test_titles_and_suffixes_are_stripped_but_never_to_nothing() -> None:
    assert strip_affixes("Prof. Dr. Maria Lopez") == "Maria Lopez"
    assert strip_affixes("Acme, Inc.") == "Acme"
    assert strip_affixes("Dr.") == "Dr."
    assert strip_affixes("News Corp.") == "News Corp."  # part of the name, not a legal form
    assert strip_affixes("Martin Luther King Jr.") == "Martin Luther King Jr."  # Jr. is not Sr.


def test_groups_keep_namesakes_apart_and_name_the_group_by_its_fullest_form() -> None:
    names = [
        "NYC",
        "New York City",
        "Prof. Maria Lopez",
        "Maria Lopez",
        "Dr. Maria Lopez",
        "M. Lopez",
        "Carlos Lopez",
    ]
    mapping = group_names(names)
    assert mapping == {
        "NYC": "New York City",
        "New York City": "New York City",
        "Prof. Maria Lopez": "Maria Lopez",
        "Maria Lopez": "Maria Lopez",
        "Dr. Maria Lopez": "Maria Lopez",
        "M. Lopez": "Maria Lopez",
        "Carlos Lopez": "Carlos Lopez",
    }


def test_an_initial_that_fits_two_people_stays_on_its_own() -> None:
    mapping = group_names(["M. Lopez", "Maria Lopez", "Miguel Lopez"])
    assert mapping == {
        "M. Lopez": "M. Lopez",
        "Maria Lopez": "Maria Lopez",
        "Miguel Lopez": "Miguel Lopez",
    }


def test_the_canonical_name_does_not_depend_on_order() -> None:
    names = ["NYC", "New York City", "N.Y.C."]
    results = {canonical_name(list(order)) for order in itertools.permutations(names)}
    assert results == {"New York City"}
    groups = {
        tuple(sorted(group_names(list(order)).items()))
        for order in itertools.permutations(["M. Lopez", "Maria Lopez", "Prof. Maria Lopez"])
    }
    assert len(groups) == 1


def test_a_veto_keeps_names_of_different_types_apart() -> None:
    types = {"NYC": "Organization", "New York City": "Location"}
    mapping = group_names(types, lambda a, b: types[a] == types[b])
    assert mapping == {"NYC": "NYC", "New York City": "New York City"}


def test_canonical_name_refuses_an_empty_group() -> None:
    with pytest.raises(ValueError, match="at least one"):
        canonical_name(["", "  "])


def test_extractive_document_summary_keeps_order_and_budget() -> None:
    parts = [
        "Maria Lopez teaches physics in New York City.",
        "The weather was mild.",
        "Maria Lopez wrote a book on physics in New York City.",
    ]
    assert extractive_summary(parts, 100) == f"{parts[0]} {parts[2]}"  # the off-topic part goes
    assert extractive_summary(parts, 60) in parts[::2]
    assert extractive_summary(parts, 1000) == " ".join(parts)
    assert len(extractive_summary([parts[2]] * 2, 50)) == 50
    assert extractive_summary(["only one part"], 50) == "only one part"
    assert extractive_summary([], 50) == ""


@pytest.mark.slow
def test_the_name_caches_stay_small_as_new_names_keep_coming() -> None:
    """A worker sees corpus after corpus: the rules' caches keep a few batches of names, not
    every name ever seen (two 65,536-name caches held 35–43 MiB and kept a worker growing)."""
    import gc
    import tracemalloc

    names = [f"Dr. Person{i} de la Something{i * 7} Jr." for i in range(60_000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keys = {resolution_key(name) for name in names}
        del keys
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 8 * 2**20, f"{grown / 2**20:.1f} MiB kept after 60,000 new names"
