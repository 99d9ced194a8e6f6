"""The LexicalIndex contract: each adapter's tests inherit it and provide `lexical_index`."""

from __future__ import annotations

from collections import Counter

from core.lexical import bm25_search, term_counts
from core.models.lexical import LexicalDoc, Posting
from core.ports import LexicalIndex
from tests.contracts.state_store import _run_threads

TEXTS = {
    "curie": "Marie Curie was born in Warsaw. Marie Curie discovered Polonium with Pierre Curie.",
    "turing": "Alan Turing was born in London. Alan Turing designed the Bombe.",
    "danube": "The Danube flows through Vienna and ends in the Black Sea.",
    "beijing": "北京是中国的首都。长城在北京附近。",
    "tokyo": "東京は日本の首都です。",
}
DOCS = [LexicalDoc(chunk, f"doc-{chunk}", text) for chunk, text in TEXTS.items()]


def expected_postings(docs: list[LexicalDoc], terms: list[str]) -> set[Posting]:
    """The postings a correct index holds for `terms`, computed from the texts alone."""
    found = set()
    for doc in docs:
        counts, length = term_counts(doc.text)
        found.update(Posting(t, doc.chunk_id, counts[t], length) for t in terms if t in counts)
    return found


def total_length(docs: list[LexicalDoc]) -> int:
    return sum(term_counts(doc.text)[1] for doc in docs)


class LexicalIndexContract:
    """Behaviour every LexicalIndex adapter must show."""

    def test_is_a_lexical_index(self, lexical_index: LexicalIndex) -> None:
        assert isinstance(lexical_index, LexicalIndex)

    def test_stats_and_postings_are_those_of_the_texts(self, lexical_index: LexicalIndex) -> None:
        assert lexical_index.count("ds") == 0
        assert lexical_index.corpus_stats(["ds"], ["curie"]).chunks == 0
        lexical_index.add("ds", DOCS)
        assert lexical_index.count("ds") == len(DOCS)
        terms = ["curie", "born", "首都", "absent"]
        stats = lexical_index.corpus_stats(["ds"], terms)
        assert (stats.chunks, stats.total_length) == (len(DOCS), total_length(DOCS))
        assert {t: n for t, n in stats.df.items() if n} == {"curie": 1, "born": 2, "首都": 2}
        assert set(lexical_index.postings(["ds"], terms)) == expected_postings(DOCS, terms)
        [curie] = lexical_index.postings(["ds"], ["curie"])
        assert (curie.chunk_id, curie.tf) == ("curie", 3)

    def test_adding_a_known_chunk_again_changes_nothing(self, lexical_index: LexicalIndex) -> None:
        lexical_index.add("ds", DOCS)
        # A redelivered batch, and a chunk id repeated inside one call, count once; a known
        # chunk id keeps what was indexed first even when the text differs.
        lexical_index.add("ds", [*DOCS[:2], LexicalDoc("curie", "doc-curie", "Other words")])
        lexical_index.add("ds", [DOCS[0], DOCS[0]])
        assert lexical_index.count("ds") == len(DOCS)
        stats = lexical_index.corpus_stats(["ds"], ["curie", "other"])
        assert stats.total_length == total_length(DOCS)
        assert (stats.df.get("curie", 0), stats.df.get("other", 0)) == (1, 0)

    def test_remove_drops_chunks_and_ignores_unknown_ids(self, lexical_index: LexicalIndex) -> None:
        lexical_index.add("ds", DOCS)
        lexical_index.remove("ds", ["curie", "not-a-chunk", "curie"])
        lexical_index.remove("ds", ["curie"])  # twice: no error, no change
        kept = DOCS[1:]
        assert lexical_index.count("ds") == len(kept)
        stats = lexical_index.corpus_stats(["ds"], ["curie", "born"])
        assert stats.total_length == total_length(kept)
        assert (stats.df.get("curie", 0), stats.df.get("born", 0)) == (0, 1)
        assert set(lexical_index.postings(["ds"], ["curie", "born"])) == expected_postings(
            kept, ["born"]
        )
        lexical_index.add("ds", [DOCS[0]])  # indexed again after its removal
        assert lexical_index.count("ds") == len(DOCS)
        assert lexical_index.corpus_stats(["ds"], []).total_length == total_length(DOCS)

    def test_datasets_are_separate_and_read_together(self, lexical_index: LexicalIndex) -> None:
        lexical_index.add("a", DOCS[:2])
        lexical_index.add("b", DOCS[1:3])
        assert (lexical_index.count("a"), lexical_index.count("b")) == (2, 2)
        both = lexical_index.corpus_stats(["a", "b"], ["turing", "danube"])
        assert both.chunks == 4
        assert both.total_length == total_length(DOCS[:2]) + total_length(DOCS[1:3])
        assert (both.df["turing"], both.df["danube"]) == (2, 1)
        assert {p.chunk_id for p in lexical_index.postings(["a"], ["danube"])} == set()
        lexical_index.remove_dataset("a")
        lexical_index.remove_dataset("a")  # already gone: no error
        assert (lexical_index.count("a"), lexical_index.count("b")) == (0, 2)
        assert lexical_index.postings(["a"], ["curie", "turing"]) == []
        assert {p.chunk_id for p in lexical_index.postings(["b"], ["turing"])} == {"turing"}

    def test_bm25_ranks_by_the_stored_postings(self, lexical_index: LexicalIndex) -> None:
        lexical_index.add("ds", DOCS)
        assert [c for c, _ in bm25_search(lexical_index, ["ds"], "Curie Warsaw", 5)] == ["curie"]
        assert {c for c, _ in bm25_search(lexical_index, ["ds"], "首都", 5)} == {
            "beijing",
            "tokyo",
        }
        ranked = bm25_search(lexical_index, ["ds"], "born London", 5)
        assert [c for c, _ in ranked] == ["turing", "curie"] and ranked[0][1] > ranked[1][1] > 0
        assert bm25_search(lexical_index, ["other"], "Curie", 5) == []

    def test_a_large_batch_is_indexed_whole(self, lexical_index: LexicalIndex) -> None:
        docs = [LexicalDoc(f"c{i}", "d", f"word{i} shared") for i in range(1203)]
        lexical_index.add("ds", docs)
        assert lexical_index.count("ds") == 1203
        assert lexical_index.corpus_stats(["ds"], ["shared"]).df["shared"] == 1203
        lexical_index.remove("ds", [d.chunk_id for d in docs[:1000]])
        assert lexical_index.count("ds") == 203

    def test_concurrent_redelivered_batches_count_each_chunk_once(
        self, lexical_index: LexicalIndex
    ) -> None:
        docs = [LexicalDoc(f"c{i}", "d", f"alpha beta{i % 7} gamma{i}") for i in range(120)]

        def work(worker: int) -> None:
            # Every worker writes overlapping slices, as redelivered batches do.
            for start in range(0, 120, 20):
                lexical_index.add("ds", docs[start : start + 20 + 10 * worker])

        _run_threads(4, work)
        assert lexical_index.count("ds") == 120
        stats = lexical_index.corpus_stats(["ds"], ["alpha", "beta3"])
        assert stats.total_length == total_length(docs)
        assert stats.df == {"alpha": 120, "beta3": Counter(i % 7 for i in range(120))[3]}
