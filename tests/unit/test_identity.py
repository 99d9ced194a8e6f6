"""Deterministic ids: the rule that makes every write an idempotent upsert."""

from __future__ import annotations

import uuid

import pytest

from core.models.graph import (
    chunk_id,
    document_id,
    edge_id,
    entity_id,
    normalise_name,
    stable_id,
)


def test_ids_are_uuid5_and_stable() -> None:
    first = document_id("ds", "ab" * 32)
    assert uuid.UUID(first).version == 5
    assert first == document_id("ds", "ab" * 32)


@pytest.mark.parametrize(
    "parts",
    [(), ("",), ("entity", "ds", "Marie Curie"), ("chunk", "ds", "Zürich ü 北京 🙂", "x" * 5000)]
    + [("edge", f"n{i}", "works for", str(i * 7919)) for i in range(200)],
)
def test_stable_id_is_uuid5_of_the_joined_parts(parts: tuple[str, ...]) -> None:
    # Ids are stored: the hand-spelled uuid5 must give exactly what uuid.uuid5 gave.
    namespace = uuid.UUID("6f1c2a43-5d0e-4c1b-9a8e-2b7c3d4e5f60")
    assert stable_id(*parts) == str(uuid.uuid5(namespace, "\x1f".join(parts)))


def test_document_ids_are_scoped_to_dataset_and_content() -> None:
    assert document_id("a", "h1") != document_id("b", "h1")
    assert document_id("a", "h1") != document_id("a", "h2")


def test_chunk_ids_follow_document_and_index() -> None:
    doc = document_id("a", "h")
    assert chunk_id(doc, 0) != chunk_id(doc, 1)
    assert chunk_id(doc, 3) == chunk_id(doc, 3)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Marie Curie", "marie  curie"),
        ("The Beatles", "Beatles"),
        ("Paris.", "paris"),
        ("ＡＢＣ", "abc"),
    ],
)
def test_entity_names_normalise_to_one_id(left: str, right: str) -> None:
    assert entity_id("ds", left) == entity_id("ds", right)


def test_entities_are_scoped_to_their_dataset() -> None:
    assert entity_id("one", "Paris") != entity_id("two", "Paris")


def test_normalise_name_keeps_inner_punctuation() -> None:
    assert normalise_name("  O'Brien, Jr. ") == "o'brien, jr"


def test_edge_id_depends_on_direction_and_name() -> None:
    assert edge_id("a", "knows", "b") != edge_id("b", "knows", "a")
    assert edge_id("a", "knows", "b") != edge_id("a", "likes", "b")
