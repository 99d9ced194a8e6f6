"""ChunkDocuments: token bounds, element boundaries, titles, overlap, ids and errors."""

from __future__ import annotations

import random

import pytest

from core.embeddings.tokenizer import count_tokens
from core.models.graph import chunk_id
from core.models.jobs import DocumentError
from pipelines.base import Pipeline
from pipelines.chunk import ChunkDocuments
from pipelines.classify import Classify
from pipelines.models import ClassifiedBatch, ClassifiedDocument, DocumentRef, Element

WORDS = [
    *("graph", "node", "edge", "worker", "chunk", "vector", "café", "naïve", "résumé"),
    *("Zürich", "東京", "2024", "3.14", "re-index", "e-mail", "don't", "(draft)", "[note]"),
    *("über-long", "tokenization", "antidisestablishment"),
]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + rng.choice(".!?")


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng, rng.randint(3, 25)) for _ in range(sentences))


def classified(*elements: Element, doc: str = "doc-1") -> ClassifiedDocument:
    ref = DocumentRef(id=doc, dataset="ds", name=f"{doc}.txt", blob_key=f"{doc}.txt")
    return ClassifiedDocument(document=ref, kind="txt", elements=list(elements))


def chunk(*docs: ClassifiedDocument, max_tokens: int = 64, overlap: int = 0) -> ClassifiedBatch:
    batch = ClassifiedBatch(dataset="ds", documents=list(docs))
    return ChunkDocuments(max_tokens=max_tokens, overlap_tokens=overlap).run(batch)


def mixed_document(seed: int) -> ClassifiedDocument:
    rng = random.Random(seed)
    elements = [Element(kind="title", text="Overview")]
    for _ in range(12):
        elements.append(Element(text=paragraph(rng, rng.randint(1, 8))))
    elements.append(
        Element(
            kind="table", text="\n".join(f"id: {i}, name: {sentence(rng, 6)}" for i in range(30))
        )
    )
    elements.append(
        Element(kind="list", text="\n".join(f"- {sentence(rng, 4)}" for _ in range(10)))
    )
    elements.append(
        Element(text=" ".join(rng.choice(WORDS) for _ in range(700)))
    )  # no sentence ends
    return classified(*elements, doc=f"doc-{seed}")


@pytest.mark.parametrize(("max_tokens", "overlap"), [(16, 0), (64, 0), (64, 16), (256, 32)])
def test_every_chunk_is_within_the_bound_and_its_count_is_exact(
    max_tokens: int, overlap: int
) -> None:
    out = chunk(mixed_document(1), mixed_document(2), max_tokens=max_tokens, overlap=overlap)
    assert len(out.chunks) > 2
    counts = count_tokens([c.text for c in out.chunks])
    assert [c.token_count for c in out.chunks] == counts
    assert max(counts) <= max_tokens


def test_whole_elements_are_packed_and_never_split_when_they_fit() -> None:
    rng = random.Random(3)
    paragraphs = [paragraph(rng, 2) for _ in range(20)]
    assert max(count_tokens(paragraphs)) <= 128
    out = chunk(classified(*(Element(text=p) for p in paragraphs)), max_tokens=128)
    assert len(out.chunks) < len(paragraphs)  # small elements share chunks
    pieces = [piece for c in out.chunks for piece in c.text.split("\n\n")]
    assert pieces == paragraphs  # every paragraph whole, in order, in exactly one chunk


def test_a_large_element_is_cut_between_sentences() -> None:
    rng = random.Random(4)
    sentences = [sentence(rng, 12) for _ in range(30)]
    out = chunk(classified(Element(text=" ".join(sentences))), max_tokens=64)
    assert len(out.chunks) > 1
    for c in out.chunks:
        assert c.text.endswith((".", "!", "?"))
    assert " ".join(c.text for c in out.chunks) == " ".join(sentences)


def test_table_rows_are_never_split() -> None:
    rows = [f"id: {i}, city: Paris, note: {'quiet street ' * 3}".strip() for i in range(40)]
    out = chunk(classified(Element(kind="table", text="\n".join(rows))), max_tokens=48)
    assert len(out.chunks) > 1
    assert [line for c in out.chunks for line in c.text.split("\n")] == rows


def test_a_huge_sentence_falls_back_to_whole_word_windows() -> None:
    words = [f"word{i % 7}" for i in range(600)]
    out = chunk(classified(Element(text=" ".join(words))), max_tokens=32)
    assert len(out.chunks) > 5
    assert all(c.token_count <= 32 for c in out.chunks)
    assert " ".join(c.text for c in out.chunks).split() == words  # no word cut in two


def test_a_word_longer_than_the_bound_is_cut_into_pieces_that_fit() -> None:
    word = "qzxjvkwq" * 10  # 80 characters, about 40 word-pieces
    out = chunk(classified(Element(text=f"Before {word} after.")), max_tokens=16)
    assert all(c.token_count <= 16 for c in out.chunks)
    assert "".join(c.text for c in out.chunks).replace(" ", "") == f"Before{word}after."


def test_a_title_moves_forward_with_the_content_after_it() -> None:
    first, second = " ".join(["node"] * 40) + ".", " ".join(["edge"] * 40) + "."
    assert count_tokens([first, "Results", second]) == [41, 1, 41]
    out = chunk(
        classified(
            Element(text=first), Element(kind="title", text="Results"), Element(text=second)
        ),
        max_tokens=64,
    )
    assert [c.text for c in out.chunks] == [first, f"Results\n\n{second}"]


def shared_text(before: str, after: str) -> str:
    """The longest end of `before` that `after` starts with."""
    for size in range(min(len(before), len(after)), 0, -1):
        if before.endswith(after[:size]):
            return after[:size]
    return ""


def test_overlap_repeats_the_end_of_the_previous_chunk() -> None:
    rng = random.Random(6)
    paragraphs = [sentence(rng, rng.randint(3, 10)) for _ in range(30)]
    assert max(count_tokens(paragraphs)) <= 64 - 12  # so that no paragraph is split
    out = chunk(
        classified(*(Element(text=p) for p in paragraphs)), max_tokens=64, overlap=12
    ).chunks
    assert len(out) > 2
    contents = [out[0].text]
    for before, after in zip(out, out[1:], strict=False):
        tail = shared_text(before.text, after.text)
        assert tail and before.text[-len(tail) - 1].isspace()  # starts at a whole word
        assert count_tokens([tail])[0] <= 12
        rest = after.text[len(tail) :]
        assert rest.startswith("\n\n")
        contents.append(rest[2:])
    assert "\n\n".join(contents).split("\n\n") == paragraphs


def test_chunk_ids_are_deterministic_and_per_document() -> None:
    first = chunk(mixed_document(7), mixed_document(8))
    again = chunk(mixed_document(7), mixed_document(8))
    assert [(c.id, c.text) for c in first.chunks] == [(c.id, c.text) for c in again.chunks]
    for c in first.chunks:
        assert c.id == chunk_id(c.document_id, c.index)
        assert c.document_name == f"{c.document_id}.txt"
    by_doc = [c.index for c in first.chunks if c.document_id == "doc-8"]
    assert by_doc == list(range(len(by_doc)))
    assert len({c.id for c in first.chunks}) == len(first.chunks)


def test_a_document_without_text_is_an_error_and_earlier_errors_are_kept() -> None:
    earlier = DocumentError(
        document_id="x", document_name="x.png", step="classify", message="binary"
    )
    batch = ClassifiedBatch(
        dataset="ds",
        documents=[classified(Element(text="  \n "), doc="blank"), classified(Element(text="Hi."))],
        errors=[earlier],
    )
    out = ChunkDocuments().run(batch)
    assert out.errors[0] == earlier
    assert [(e.document_id, e.step) for e in out.errors[1:]] == [("blank", "chunk")]
    assert "no text" in out.errors[1].message
    assert [d.id for d in out.documents] == ["doc-1"]
    assert [c.text for c in out.chunks] == ["Hi."]


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"max_tokens": 15}, "15"),
        ({"max_tokens": 64, "overlap_tokens": -1}, "-1"),
        ({"max_tokens": 64, "overlap_tokens": 64}, "64"),
    ],
)
def test_invalid_configuration_names_the_bad_value(kwargs: dict, bad: str) -> None:
    with pytest.raises(ValueError, match=f"got {bad}"):
        ChunkDocuments(**kwargs)


def test_classify_feeds_chunk_in_a_pipeline() -> None:
    pipeline = Pipeline("t", "1", [Classify, ChunkDocuments])
    assert pipeline.step_names == ["classify", "chunk"]
