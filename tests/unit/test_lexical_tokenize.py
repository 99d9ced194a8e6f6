"""Tokenisation and BM25 scoring of the lexical index (CHUNKS_LEXICAL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.lexical import bm25_search, tokenize
from core.models.lexical import LexicalDoc
from core.stores.sqlite.lexical import SQLiteLexicalIndex


def test_latin_text_becomes_lowercase_words_without_stopwords() -> None:
    assert tokenize("The Nobel Prize in Physics, 1903!") == ["nobel", "prize", "physics", "1903"]


def test_accents_and_full_width_forms_are_normalised() -> None:
    assert tokenize("Ｃａｆé CAFÉ") == ["café", "café"]


def test_chinese_runs_become_unigrams_and_bigrams() -> None:
    assert tokenize("北京大学") == ["北", "京", "大", "学", "北京", "京大", "大学"]


def test_japanese_kana_and_kanji_are_split_without_spaces() -> None:
    terms = tokenize("東京タワー")
    assert {"東京", "タワ", "ワー", "京タ"} <= set(terms) and "東京タワー" not in terms


def test_mixed_scripts_keep_latin_words_whole() -> None:
    assert tokenize("Tokyo東京2020") == ["tokyo", "東", "京", "東京", "2020"]


def test_hangul_is_indexed_by_characters() -> None:
    assert "서울" in tokenize("서울은 한국의 수도")


@pytest.fixture
def index(tmp_path: Path) -> SQLiteLexicalIndex:
    idx = SQLiteLexicalIndex(tmp_path / "lexical.sqlite")
    idx.add(
        "ds",
        [
            LexicalDoc("c1", "d1", "apple banana apple"),
            LexicalDoc("c2", "d1", "banana cherry"),
            LexicalDoc("c3", "d2", "cherry date elderberry fig grape"),
        ],
    )
    return idx


def test_bm25_prefers_rare_terms_and_higher_frequency(index: SQLiteLexicalIndex) -> None:
    ranked = bm25_search(index, ["ds"], "apple banana", 10)
    assert [chunk for chunk, _ in ranked] == ["c1", "c2"]
    assert ranked[0][1] > ranked[1][1] > 0


def test_adding_a_chunk_twice_does_not_change_scores(index: SQLiteLexicalIndex) -> None:
    before = bm25_search(index, ["ds"], "cherry", 10)
    index.add("ds", [LexicalDoc("c2", "d1", "banana cherry")])
    assert bm25_search(index, ["ds"], "cherry", 10) == before and index.count("ds") == 3


def test_removed_chunks_and_datasets_leave_no_postings(index: SQLiteLexicalIndex) -> None:
    index.remove("ds", ["c1", "not-a-chunk"])
    assert [c for c, _ in bm25_search(index, ["ds"], "apple banana", 10)] == ["c2"]
    index.remove_dataset("ds")
    assert index.count("ds") == 0 and bm25_search(index, ["ds"], "cherry", 10) == []


def test_datasets_are_searched_only_when_asked(index: SQLiteLexicalIndex) -> None:
    index.add("other", [LexicalDoc("o1", "d9", "apple pie")])
    assert [c for c, _ in bm25_search(index, ["other"], "apple", 10)] == ["o1"]
    assert {c for c, _ in bm25_search(index, ["ds", "other"], "apple", 10)} == {"c1", "o1"}
