"""bench/rewrite.py: renamed generations are reproducible, distinct, and really new entities."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.rewrite import KEPT, rename, rewrite
from tests.llm_server import graph_for_text

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]

PASSAGES = [
    "Journal of Mathematical Physics\nThe Journal of Mathematical Physics is published monthly "
    "by the American Institute of Physics. It was first published in January 1960.",
    "Carl Rogers\nCarl Rogers was born in Oak Park, Illinois. He taught at the University of "
    "Chicago, where Rogers met NASA engineers in 1957.",
    "Where Are You\nWhere Are You may refer to:",  # no name at all
]


def entities(text: str) -> set[str]:
    """What the stand-in LLM extracts as entity names (the distributed bench's graph)."""
    return {e["name"] for e in graph_for_text(text)["entities"]}


def test_a_generation_is_the_same_in_every_process() -> None:
    # SHA-256, not hash(): another interpreter (another PYTHONHASHSEED) writes the same text.
    code = "from bench.rewrite import rewrite; import sys; print(rewrite(sys.argv[1], 3))"
    other = subprocess.run(
        [sys.executable, "-c", code, PASSAGES[1]],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.rstrip("\n")
    assert other == rewrite(PASSAGES[1], 3)
    assert rewrite(PASSAGES[1], 0) == PASSAGES[1]


def test_every_generation_of_every_passage_is_distinct() -> None:
    texts = [rewrite(text, g) for text in PASSAGES for g in range(6)]
    assert len(set(texts)) == len(texts)


def test_the_entity_names_change_and_stay_shared_within_a_generation() -> None:
    original = entities(PASSAGES[1])
    first, second = entities(rewrite(PASSAGES[1], 1)), entities(rewrite(PASSAGES[1], 2))
    assert len(first) == len(original), "one new name per old name: the graph keeps its shape"
    assert not first & original and not second & original and not first & second
    # "Carl Rogers" in the title and "Rogers" in the text stay one person's names.
    renamed = rename("Rogers", 1)
    assert f"{rename('Carl', 1)} {renamed}" in rewrite(PASSAGES[1], 1)
    assert f"where {renamed} met" in rewrite(PASSAGES[1], 1)
    # The same name in another passage of the same generation is the same new name.
    assert rename("Rogers", 1) in rewrite("Rogers wrote books.", 1)


def test_case_grammar_dates_and_numbers_are_kept() -> None:
    text = rewrite(PASSAGES[0], 4)
    assert "It was first published in January 1960." in text
    assert " is published monthly by the " in text
    acronym = rename("NASA", 4)
    assert acronym.isupper() and len(acronym) == 4 and acronym != "NASA"
    name = rename("Illinois", 4)
    assert name[0].isupper() and name[1:].islower() and name != "Illinois"
    assert {"the", "january", "he", "ii"} <= KEPT
    assert len(text.split()) == len(PASSAGES[0].split()), "as many words: the same work"


def test_a_passage_without_names_renames_its_kept_words() -> None:
    renamed = rewrite(PASSAGES[2], 1)
    assert renamed != PASSAGES[2] and renamed.endswith(" may refer to:")
