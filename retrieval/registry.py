"""Every search type, declared once: what it finds, how its retriever is built, what it needs.

`search`, the query router's fallbacks, FEELING_LUCKY and AGENTIC_COMPLETION (which get this
registry when they are built), `cogmill eval` and recall all read `RETRIEVERS`. A new search
type is its retriever module plus one `RetrieverSpec` here.
"""

from __future__ import annotations

from retrieval.agentic import AgenticRetriever
from retrieval.base import Registry, RetrievalContext, RetrieverSpec
from retrieval.chunks import ChunksRetriever
from retrieval.coding_rules import CodingRulesRetriever
from retrieval.context_extension import ContextExtensionRetriever
from retrieval.cot import CotRetriever
from retrieval.cypher import CypherRetriever, NaturalLanguageRetriever
from retrieval.decomposition import DecompositionRetriever
from retrieval.graph_completion import GraphCompletionRetriever
from retrieval.graph_summary import GraphSummaryRetriever
from retrieval.hybrid import HybridRetriever
from retrieval.lexical import LexicalRetriever, lexical_index
from retrieval.lucky import FeelingLuckyRetriever
from retrieval.models import SearchType as S
from retrieval.ppr.params import PPRParams
from retrieval.ppr.retriever import PPRRetriever
from retrieval.rag import RagRetriever
from retrieval.summaries import SummariesRetriever
from retrieval.temporal import TemporalRetriever
from retrieval.triplets import TripletRetriever


def _ppr(ctx: RetrievalContext) -> PPRRetriever:
    params = PPRParams.from_settings(ctx.settings)
    return PPRRetriever(ctx.graph, ctx.vectors, ctx.embedder, params, ctx=ctx)


# A retriever that answers defines `get_completion` (retrieval/answer.py's CompletionMixin).
RETRIEVERS: Registry = Registry(
    [
        RetrieverSpec(
            S.CHUNKS,
            "passages nearest in meaning to the query",
            lambda ctx: ChunksRetriever(ctx.graph, ctx.vectors, ctx.embedder),
        ),
        RetrieverSpec(
            S.GRAPH_COMPLETION,
            "an answer from graph triplets around the query's entities",
            lambda ctx: GraphCompletionRetriever(ctx.graph, ctx.vectors, ctx.embedder, ctx=ctx),
        ),
        RetrieverSpec(
            S.CHUNKS_LEXICAL,
            "passages containing the exact words or phrase (keyword search)",
            lambda ctx: LexicalRetriever(ctx.graph, lexical_index(ctx)),
        ),
        RetrieverSpec(
            S.SUMMARIES,
            "summaries of passages",
            lambda ctx: SummariesRetriever(ctx.graph, ctx.vectors, ctx.embedder),
            needs=frozenset({"summaries"}),
        ),
        RetrieverSpec(S.RAG_COMPLETION, "an answer from the nearest passages", RagRetriever),
        RetrieverSpec(
            S.TRIPLET_COMPLETION, "an answer from the nearest graph triplets", TripletRetriever
        ),
        RetrieverSpec(S.HYBRID_COMPLETION, "passages and triplets together", HybridRetriever),
        RetrieverSpec(
            S.CYPHER,
            "a Cypher graph query given verbatim",
            CypherRetriever,
            needs=frozenset({"neo4j"}),
        ),
        RetrieverSpec(
            S.NATURAL_LANGUAGE,
            "a question translated into a graph query",
            NaturalLanguageRetriever,
            needs=frozenset({"neo4j", "llm"}),
        ),
        RetrieverSpec(
            S.TEMPORAL,
            "events in a time range (when, before, after, years)",
            TemporalRetriever,
            needs=frozenset({"events"}),
        ),
        RetrieverSpec(
            S.GRAPH_PPR,
            "entities and facts connected to the query (personalised PageRank)",
            _ppr,
        ),
        RetrieverSpec(
            S.GRAPH_COMPLETION_COT,
            "step-by-step reasoning with follow-up questions",
            CotRetriever,
        ),
        RetrieverSpec(
            S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
            "how things are related, hop by hop",
            ContextExtensionRetriever,
        ),
        RetrieverSpec(
            S.GRAPH_COMPLETION_DECOMPOSITION,
            "a compound question split into sub-questions",
            DecompositionRetriever,
        ),
        RetrieverSpec(
            S.GRAPH_SUMMARY_COMPLETION,
            "a summary or overview of a topic",
            GraphSummaryRetriever,
        ),
        RetrieverSpec(
            S.CODING_RULES,
            "the stored coding rules",
            CodingRulesRetriever,
            needs=frozenset({"node_set"}),
        ),
        RetrieverSpec(
            S.FEELING_LUCKY,
            "the one search type an LLM picks for the question",
            lambda ctx: FeelingLuckyRetriever(ctx, RETRIEVERS),
            delegates=True,
        ),
        RetrieverSpec(
            S.AGENTIC_COMPLETION,
            "an LLM calling the other search types as tools until it can answer",
            lambda ctx: AgenticRetriever(ctx, RETRIEVERS),
            delegates=True,
        ),
    ]
)
