"""The rule-based query router and query analysis: a table of queries and their types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.models import SearchType
from retrieval.router import DEFAULT_TYPE, analyse, entities_of, is_negated, route, time_is_subject

S = SearchType
HELDOUT = Path(__file__).resolve().parents[1] / "data" / "heldout_company" / "questions.json"

TABLE: list[tuple[str, SearchType]] = [
    # Cypher
    ("MATCH (p:Person)-[:WORKS_AT]->(c) RETURN p.name", S.CYPHER),
    ("match (n) return count(n)", S.CYPHER),
    ("OPTIONAL MATCH (a:Entity {name: 'Ada'}) WITH a RETURN a", S.CYPHER),
    ("CREATE (n:Note {text: 'x'})", S.CYPHER),
    # coding rules and code
    ("What are our coding rules for error handling?", S.CODING_RULES),
    ("Which naming conventions apply to Python modules?", S.CODING_RULES),
    ("Should `load_config()` raise or return None per the style guide?", S.CODING_RULES),
    ("best practices for code review of database migrations", S.CODING_RULES),
    ("我们的代码规范对异常处理有什么要求", S.CODING_RULES),
    # exact wording
    ('"the quick brown fox"', S.CHUNKS_LEXICAL),
    ("“knowledge graph memory engine”", S.CHUNKS_LEXICAL),
    ("Find the exact sentence about the merger", S.CHUNKS_LEXICAL),
    ("show me verbatim what the contract says about penalties", S.CHUNKS_LEXICAL),
    ("合同中关于违约的原文", S.CHUNKS_LEXICAL),
    # summaries
    ("Summarise the findings of the audit", S.SUMMARIES),
    ("Give me an overview of the project", S.SUMMARIES),
    ("high-level recap of the quarterly report", S.SUMMARIES),
    ("总结一下这份报告", S.SUMMARIES),
    ("请概述这个项目的主要内容", S.SUMMARIES),
    # reasoning asked for in so many words (one "why" alone is an ordinary question)
    ("Why did Acme Corp move its headquarters? Explain step by step", S.GRAPH_COMPLETION_COT),
    ("Explain the reasons why the scheduler failed", S.GRAPH_COMPLETION_COT),
    ("为什么这个服务会失败？请一步一步解释", S.GRAPH_COMPLETION_COT),
    # how two named things are related
    ("How is Marie Curie related to Pierre Curie?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("How are Kafka and Zookeeper connected?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("What is the relationship between Alice and Bob?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("爱因斯坦和玻尔是什么关系", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("这两家公司之间有什么联系", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    # time as the subject of the question
    ("What happened to the company after 2015?", S.TEMPORAL),
    ("What happened at Initech in 2016?", S.TEMPORAL),
    ("Events between 1990 and 2000", S.TEMPORAL),
    ("events between 1910 and 1920", S.TEMPORAL),
    ("What changed in March 2019?", S.TEMPORAL),
    ("latest changes", S.TEMPORAL),
    ("Show me the most recent news about Globex", S.TEMPORAL),
    ("In 2016, what happened to Acme?", S.TEMPORAL),
    ("2010年之前发生了什么", S.TEMPORAL),
    ("公司最近的动态", S.TEMPORAL),
    # a date, "before" or "when" that qualifies an entity or is the answer: the default
    ("When did Ada Lovelace publish her notes?", S.GRAPH_PPR),
    ("Which treaties were signed in 1648?", S.GRAPH_PPR),
    ("Which supplier makes the product that first shipped in March 2019?", S.GRAPH_PPR),
    ("Which company did X work for before she joined Initech?", S.GRAPH_PPR),
    ("What happened to the product that first shipped in March 2019?", S.GRAPH_PPR),
    ("Who was the mayor of Lisbon in 1990?", S.GRAPH_PPR),
    ("他什么时候加入公司的", S.GRAPH_PPR),
    ("公司在哪一年上市", S.GRAPH_PPR),
    # one weak cue does not leave the default
    ("Why did Acme Corp move its headquarters?", S.GRAPH_PPR),
    ("Explain how the scheduler assigns tasks", S.GRAPH_PPR),
    ("Which companies are linked to Globex?", S.GRAPH_PPR),
    ("为什么这个服务会失败", S.GRAPH_PPR),
    # negated cues do not count
    ("Which people are not related to Globex?", S.GRAPH_PPR),
    ("Don't summarise, who founded Initech?", S.GRAPH_PPR),
    ("List suppliers without any relationship to Acme", S.GRAPH_PPR),
    ("与这家公司没有关系的人有哪些", S.GRAPH_PPR),
    ("不要总结，谁创立了这家公司", S.GRAPH_PPR),
    # no cue: the default
    ("Who founded Initech?", S.GRAPH_PPR),
    ("What does the Atlas service store?", S.GRAPH_PPR),
    ("Where is the Louvre?", S.GRAPH_PPR),
    ("谁是这家公司的创始人", S.GRAPH_PPR),
]


@pytest.mark.parametrize(("query", "expected"), TABLE, ids=[q[:40] for q, _ in TABLE])
def test_route_table(query: str, expected: SearchType) -> None:
    chosen = route(query)
    assert chosen.search_type is expected, (query, chosen)
    assert 0.0 < chosen.confidence <= 1.0
    assert 0.0 <= chosen.runner_up_score <= chosen.confidence
    assert chosen.runner_up is not chosen.search_type


def test_table_is_large_and_covers_every_routable_type() -> None:
    assert len(TABLE) >= 30
    assert {t for _, t in TABLE} == {
        S.CYPHER,
        S.CODING_RULES,
        S.CHUNKS_LEXICAL,
        S.SUMMARIES,
        S.GRAPH_COMPLETION_COT,
        S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
        S.TEMPORAL,
        DEFAULT_TYPE,
    }
    assert sum(1 for q, _ in TABLE if any("\u4e00" <= ch <= "\u9fff" for ch in q)) >= 10


def test_the_default_is_the_best_general_retriever_and_says_so() -> None:
    assert DEFAULT_TYPE is S.GRAPH_PPR  # docs/benchmarks.md: best R@5 on both benches
    default = route("Who founded Initech?")
    assert default.search_type is S.GRAPH_PPR
    assert default.reason == "no strong specific cue: the default, GRAPH_PPR"
    assert default.runner_up is S.CHUNKS and default.runner_up_score == 0.0
    leaning = route("Why did Acme move?")  # a weak cue: the default, less sure, COT second
    assert leaning.search_type is S.GRAPH_PPR and leaning.runner_up is S.GRAPH_COMPLETION_COT
    assert leaning.confidence < default.confidence
    strong = route("Why did Acme move? Explain step by step")
    assert strong.search_type is S.GRAPH_COMPLETION_COT and strong.runner_up is S.GRAPH_PPR
    assert strong.reason.startswith("a strong GRAPH_COMPLETION_COT cue")


def test_runner_up_is_the_second_cue() -> None:
    # A time subject and "why" both vote; reasoning is the runner-up.
    chosen = route("Why, and what happened to the merger after 2015?")
    assert chosen.search_type is S.TEMPORAL
    assert chosen.runner_up is S.GRAPH_PPR
    assert 0 < chosen.runner_up_score < chosen.confidence


@pytest.mark.parametrize(
    ("query", "subject"),
    [
        ("what happened in 2016", True),
        ("events between 1910 and 1920", True),
        ("latest changes", True),
        ("What was new at Globex in the last 30 days?", True),
        ("Which events took place during 1968?", True),
        ("Timeline of the merger", True),
        ("Corvana 2020年发生了什么", True),
        ("the product first shipped in March 2019", False),
        ("the company where X worked before Y", False),
        ("What happened to the company that was founded in 1998?", False),
        ("When was the composer of the Zorvath Quintet born?", False),
        ("Who led Acme before 2010?", False),
        ("他2010年之前在哪里工作", False),
    ],
)
def test_time_is_the_subject_only_when_the_question_asks_what_happened(
    query: str, subject: bool
) -> None:
    assert time_is_subject(query) is subject
    assert (route(query).search_type is S.TEMPORAL) is subject


def test_the_router_skips_what_the_datasets_cannot_serve() -> None:
    limits = {
        S.CYPHER: "the graph is not in Neo4j",
        S.CODING_RULES: "no documents in node set 'coding_rules' of d",
        S.TEMPORAL: "no events in d (cognify with the temporal pipeline)",
    }
    cypher = route("MATCH (n) RETURN n", limits.get)
    assert cypher.search_type is S.GRAPH_PPR
    assert cypher.reason.endswith("CYPHER skipped: the graph is not in Neo4j")
    rules = route("What are our coding rules for error handling?", limits.get)
    assert rules.search_type is S.GRAPH_PPR and "CODING_RULES skipped" in rules.reason
    # No events: TEMPORAL runs in its fallback mode (passages that mention the time), and the
    # route says so.
    temporal = route("What happened at Initech in 2016?", limits.get)
    assert temporal.search_type is S.TEMPORAL
    assert "no events in d" in temporal.reason and "by their time" in temporal.reason
    served = route("MATCH (n) RETURN n", lambda kind: None)
    assert served.search_type is S.CYPHER and "skipped" not in served.reason
    # The limits are asked about strong candidates only, never about the default.
    asked: list[SearchType] = []
    route("Who founded Initech?", lambda kind: asked.append(kind))
    assert asked == []


def test_heldout_questions_route_by_their_class() -> None:
    questions = json.loads(HELDOUT.read_text(encoding="utf-8"))
    classes = {q["class"] for q in questions}
    assert {
        "multi-hop",
        "time-subject",
        "qualified-date",
        "quoted",
        "summary",
        "chinese",
    } <= classes
    wrong = [
        (q["question"], route(q["question"]).search_type.value, q["route"])
        for q in questions
        if route(q["question"]).search_type.value != q["route"]
    ]
    assert wrong == []


def test_negation_only_reaches_a_few_words_back() -> None:
    assert is_negated("people not ")
    assert is_negated("people that are not really ")
    assert not is_negated("not a problem, but how is X ")
    assert is_negated("没有")
    assert not is_negated("他们之间有")


def test_empty_query_is_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="query is empty"):
        route("   ")


def test_analysis_kinds_and_tuning() -> None:
    factual = analyse("Who founded Initech in Austin?", base_top_k=10)
    assert factual.kind == "factual"
    assert factual.entities == ["Initech", "Austin"]
    assert "founded" in factual.keywords and "who" not in factual.keywords

    reasoning = analyse("Why did Acme Corp and Globex merge, and what changed for Initech?")
    assert reasoning.kind == "reasoning"
    assert reasoning.complexity == "complex"
    assert reasoning.top_k > factual.top_k and reasoning.depth > factual.depth

    assert analyse("Summarise every incident report").kind == "comprehensive"
    assert analyse("something about databases").kind == "fuzzy"
    assert analyse("总结所有的事故报告").kind == "comprehensive"


def test_analysis_bounds() -> None:
    long_query = ", ".join(f"Item{i} and Thing{i}" for i in range(40)) + " explain why"
    result = analyse(long_query, base_top_k=90, max_depth=4)
    assert result.top_k == 100 and result.depth == 4
    assert analyse("x y", base_top_k=1).top_k >= 1


def test_entities_include_quoted_phrases() -> None:
    assert entities_of('Where does "data lake" appear next to Snowflake?') == [
        "data lake",
        "Snowflake",
    ]


def test_cli_route_prints_the_choice_as_json() -> None:
    from typer.testing import CliRunner

    from api.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["route", "Summarise the Q3 report", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "search_type": "SUMMARIES",
        "confidence": route("Summarise the Q3 report").confidence,
        "runner_up": "GRAPH_PPR",
        "runner_up_score": route("Summarise the Q3 report").runner_up_score,
        "reason": "a strong SUMMARIES cue (score 2.5)",
        "as_of": None,
    }
    text = runner.invoke(app, ["route", "MATCH (n) RETURN n"])
    assert text.exit_code == 0 and text.output.startswith("CYPHER (confidence")
    empty = runner.invoke(app, ["route", " "])
    assert empty.exit_code == 2 and "query is empty" in empty.output


@pytest.mark.parametrize(
    ("query", "as_of"),
    [
        ("Who was the CEO of Holbeck Foods in 2020?", "2020"),
        ("Where did Ana Lima live in March 2019?", "march 2019"),
        ("Which company employed Jon Berg as of 2018?", "2018"),
        ("Who is the CEO of Holbeck Foods?", None),
        ("Who was the first CEO of Holbeck Foods?", None),
    ],
)
def test_a_question_about_a_fact_at_a_time_is_searched_as_of_it(query: str, as_of: str | None):
    routed = route(query)
    assert (routed.search_type, routed.as_of) == (DEFAULT_TYPE, as_of)
    if as_of:
        assert f"as of {as_of}" in routed.reason


def test_a_question_whose_subject_is_a_time_stays_temporal():
    routed = route("What happened to Holbeck Foods in 2019?")
    assert (routed.search_type, routed.as_of) == (SearchType.TEMPORAL, None)
