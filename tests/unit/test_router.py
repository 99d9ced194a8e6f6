"""The rule-based query router and query analysis: a table of queries and their types."""

from __future__ import annotations

import pytest

from retrieval.models import SearchType
from retrieval.router import analyse, entities_of, is_negated, route

pytestmark = pytest.mark.unit
S = SearchType

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
    ("Summarise the findings of the audit", S.GRAPH_SUMMARY_COMPLETION),
    ("Give me an overview of the project", S.GRAPH_SUMMARY_COMPLETION),
    ("high-level recap of the quarterly report", S.GRAPH_SUMMARY_COMPLETION),
    ("总结一下这份报告", S.GRAPH_SUMMARY_COMPLETION),
    ("请概述这个项目的主要内容", S.GRAPH_SUMMARY_COMPLETION),
    # reasoning
    ("Why did Acme Corp move its headquarters?", S.GRAPH_COMPLETION_COT),
    ("Explain how the scheduler assigns tasks", S.GRAPH_COMPLETION_COT),
    ("Walk me through the billing process step by step", S.GRAPH_COMPLETION_COT),
    ("为什么这个服务会失败", S.GRAPH_COMPLETION_COT),
    ("请解释一下这个算法", S.GRAPH_COMPLETION_COT),
    # relationships
    ("How is Marie Curie related to Pierre Curie?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("How are Kafka and Zookeeper connected?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("What is the relationship between Alice and Bob?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("Which companies are linked to Globex?", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("爱因斯坦和玻尔是什么关系", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    ("这两家公司之间有什么联系", S.GRAPH_COMPLETION_CONTEXT_EXTENSION),
    # time
    ("When did Ada Lovelace publish her notes?", S.TEMPORAL),
    ("What happened to the company after 2015?", S.TEMPORAL),
    ("Events between 1990 and 2000", S.TEMPORAL),
    ("Which treaties were signed in 1648?", S.TEMPORAL),
    ("他什么时候加入公司的", S.TEMPORAL),
    ("公司在哪一年上市", S.TEMPORAL),
    ("2010年之前发生了什么", S.TEMPORAL),
    # negated cues do not count
    ("Which people are not related to Globex?", S.GRAPH_COMPLETION),
    ("Don't summarise, who founded Initech?", S.GRAPH_COMPLETION),
    ("List suppliers without any relationship to Acme", S.GRAPH_COMPLETION),
    ("与这家公司没有关系的人有哪些", S.GRAPH_COMPLETION),
    ("不要总结，谁创立了这家公司", S.GRAPH_COMPLETION),
    # no cue: graph completion
    ("Who founded Initech?", S.GRAPH_COMPLETION),
    ("What does the Atlas service store?", S.GRAPH_COMPLETION),
    ("Where is the Louvre?", S.GRAPH_COMPLETION),
    ("谁是这家公司的创始人", S.GRAPH_COMPLETION),
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
        S.GRAPH_SUMMARY_COMPLETION,
        S.GRAPH_COMPLETION_COT,
        S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
        S.TEMPORAL,
        S.GRAPH_COMPLETION,
    }
    assert sum(1 for q, _ in TABLE if any("\u4e00" <= ch <= "\u9fff" for ch in q)) >= 10


def test_strong_cues_are_surer_than_the_default() -> None:
    default = route("Who founded Initech?")
    strong = route("Why did Acme move? Explain step by step")
    assert default.confidence < 0.6 < strong.confidence
    assert default.runner_up is S.RAG_COMPLETION and default.runner_up_score == 0.0


def test_runner_up_is_the_second_cue() -> None:
    # "why" (reasoning) and "when" (time) both vote; the other one is the runner-up.
    chosen = route("Why and when did the merger fail after 2015?")
    assert chosen.search_type is S.TEMPORAL
    assert chosen.runner_up is S.GRAPH_COMPLETION_COT
    assert chosen.runner_up_score > 0


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
    import json

    from typer.testing import CliRunner

    from api.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["route", "Summarise the Q3 report", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "search_type": "GRAPH_SUMMARY_COMPLETION",
        "confidence": route("Summarise the Q3 report").confidence,
        "runner_up": "GRAPH_COMPLETION",
        "runner_up_score": route("Summarise the Q3 report").runner_up_score,
    }
    text = runner.invoke(app, ["route", "MATCH (n) RETURN n"])
    assert text.exit_code == 0 and text.output.startswith("CYPHER (confidence")
    empty = runner.invoke(app, ["route", " "])
    assert empty.exit_code == 2 and "query is empty" in empty.output
