"""Each completion type's answer is asked with its own instructions (the one CompletionMixin).

The final answer of a search is the last chat request whose system prompt is the answer
prompt (plain or structured); its system message must be that prompt plus the type's own
instructions, exactly: a type that lost them, or got another's, fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from core.settings import Settings
from retrieval.answer import STRUCTURED_PROMPT, SYSTEM_PROMPT
from retrieval.coding_rules import RULES_INSTRUCTIONS
from retrieval.context_extension import FINAL_INSTRUCTIONS
from retrieval.cot import STEP_INSTRUCTIONS
from retrieval.decomposition import COMBINE_INSTRUCTIONS
from retrieval.graph_completion import GRAPH_INSTRUCTIONS
from retrieval.graph_summary import ANSWER_INSTRUCTIONS
from retrieval.models import SearchType
from retrieval.search import search
from retrieval.temporal import INSTRUCTIONS as TIME_INSTRUCTIONS
from retrieval.triplets import TripletRetriever
from runtime import Runtime
from tests.backends import add_files, llm_settings, succeeded, threaded_runtime, write_files
from tests.recording_llm import RecordingLLMServer
from workers.orchestration import cognify

S = SearchType
DATASET = "prompts"
CORPUS = {
    "turing.txt": "Alan Turing was born in London. Alan Turing designed the Bombe at Bletchley "
    "Park in 1940. Alan Turing proposed the imitation game in 1950.",
    "lovelace.txt": "Ada Lovelace was born in London in 1815. Ada Lovelace wrote the first "
    "program for the Analytical Engine of Charles Babbage.",
}
RULES = (
    "# Python rules\n\n- Use snake_case for function names.\n- Write a docstring for each module.\n"
)
QUESTION = "Who designed the Bombe?"
# The instructions each type adds to the answer prompt (None: the prompt alone).
EXPECTED: list[tuple[SearchType, str, str | None]] = [
    (S.RAG_COMPLETION, QUESTION, None),
    (S.GRAPH_COMPLETION, QUESTION, GRAPH_INSTRUCTIONS),
    (S.TRIPLET_COMPLETION, QUESTION, TripletRetriever.instructions),
    (S.HYBRID_COMPLETION, QUESTION, None),
    (S.GRAPH_PPR, QUESTION, None),
    (S.TEMPORAL, "What happened in 1940?", TIME_INSTRUCTIONS),
    (S.TEMPORAL, QUESTION, None),  # no time in the question: plain GRAPH_PPR passages
    (S.CODING_RULES, "How should I name Python functions?", RULES_INSTRUCTIONS),
    (S.GRAPH_COMPLETION_COT, QUESTION, STEP_INSTRUCTIONS),
    (S.GRAPH_COMPLETION_CONTEXT_EXTENSION, QUESTION, FINAL_INSTRUCTIONS),
    (S.GRAPH_SUMMARY_COMPLETION, QUESTION, ANSWER_INSTRUCTIONS),
    (S.AGENTIC_COMPLETION, QUESTION, None),
]


class Person(BaseModel):
    name: str


@pytest.fixture(scope="module")
def llm() -> Iterator[RecordingLLMServer]:
    with RecordingLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, llm: RecordingLLMServer) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("prompts")
    settings = Settings(home=home / "home", search_max_rounds=2, **llm_settings(llm))
    with threaded_runtime(settings) as rt:
        files = home / "files"
        report = add_files(rt, DATASET, write_files(files, CORPUS))
        rules = write_files(files, {"rules.md": RULES})
        report.rejected += add_files(rt, DATASET, rules, node_set="coding_rules").rejected
        assert not report.rejected, report.rejected
        succeeded(rt, cognify(rt, DATASET))
        assert rt.llm is not None
        rt.llm.cache = None  # every prompt reaches the server, where the tests read it
        yield rt


def answer_system(llm: RecordingLLMServer, since: int) -> str:
    """The system message of the last answer request made since `since`."""
    systems = []
    for prompt in llm.prompts[since:]:
        messages: list[dict[str, Any]] = json.loads(prompt)
        system = str(messages[0]["content"]) if messages[0]["role"] == "system" else ""
        if system.startswith((SYSTEM_PROMPT, STRUCTURED_PROMPT)):
            systems.append(system)
    assert systems, "the search asked the LLM for no answer"
    return systems[-1]


def with_instructions(prompt: str, instructions: str | None) -> str:
    return f"{prompt}\n\n{instructions.strip()}" if instructions else prompt


@pytest.mark.parametrize(("search_type", "query", "instructions"), EXPECTED)
def test_the_answer_is_asked_with_the_types_instructions(
    runtime: Runtime,
    llm: RecordingLLMServer,
    search_type: SearchType,
    query: str,
    instructions: str | None,
) -> None:
    mark = len(llm.prompts)
    response = search(runtime.retrieval(), query, [DATASET], search_type, top_k=4)
    assert response.answer, response
    assert answer_system(llm, mark) == with_instructions(SYSTEM_PROMPT, instructions)


def test_decomposition_combines_the_sub_answers_in_its_instructions(
    runtime: Runtime, llm: RecordingLLMServer
) -> None:
    query = "Who designed the Bombe and where was Ada Lovelace born?"
    mark = len(llm.prompts)
    response = search(runtime.retrieval(), query, [DATASET], S.GRAPH_COMPLETION_DECOMPOSITION)
    assert response.answer, response
    lead = COMBINE_INSTRUCTIONS.split("{answers}")[0]
    system = answer_system(llm, mark)
    assert system.startswith(f"{SYSTEM_PROMPT}\n\n{lead}- "), system
    assert system.count("\n- ") >= 2, system  # one line per sub-question's answer


@pytest.mark.parametrize(
    ("search_type", "instructions"),
    [(S.GRAPH_COMPLETION, GRAPH_INSTRUCTIONS), (S.GRAPH_COMPLETION_COT, None)],
)
def test_a_structured_answer_keeps_the_types_instructions(
    runtime: Runtime,
    llm: RecordingLLMServer,
    search_type: SearchType,
    instructions: str | None,
) -> None:
    """COT reasons in text rounds; its structured reply is one more plain call over them."""
    mark = len(llm.prompts)
    response = search(
        runtime.retrieval(), QUESTION, [DATASET], search_type, top_k=4, response_model=Person
    )
    assert response.answer_json is not None, response
    assert answer_system(llm, mark) == with_instructions(STRUCTURED_PROMPT, instructions)
