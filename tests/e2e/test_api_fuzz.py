"""The API's proof: schemathesis fuzzes every operation of the OpenAPI document against the real
app (uvicorn, embedded runtime; tests/e2e/fuzz_support.py) with an admin key, then a sample
with a reader key. No response may be a 5xx, every status must be documented, and every body
must be valid against the schema its status declares (errors: the one error schema).

Bounded and deterministic: schemathesis' coverage phase (boundary and invalid values of every
parameter and body property, a few dozen cases per operation), then a fixed number of drawn
examples per operation and generation mode (valid and invalid data), derandomized Hypothesis,
no shrinking (a failure is reported as the request that caused it)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.fuzz_support import SEEDED, SESSION, SPARE, FuzzWorld, fuzz_world
from tests.llm_server import LLMTestServer

pytestmark = pytest.mark.slow  # a fuzz run

EXAMPLES = 10  # drawn per operation and generation mode, admin key
READER_EXAMPLES = 3  # drawn per operation, valid data, reader key (403s are fine, 5xx never)
# The coverage phase probes one method an operation does not declare (a 405, not a 5xx), not
# all seven: the same router answers them all.
CONFIG = {"phases": {"coverage": {"unexpected-methods": ["patch"]}}}
# Schema keywords that let a path parameter be generated invalid (a bare string cannot be).
CONSTRAINTS = {"pattern", "minLength", "maxLength", "enum", "format", "minimum", "maximum"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Server-sent events: called and status-checked like every route, but the body is a stream of
# `event:`/`data:` lines the schema can only call a string, so it is not validated.
STREAMS = {"GET /api/v1/jobs/{job_id}/events"}
# Deleting, forgetting and emptying come last (datasets: aimed at the spare one), so the seeded
# objects stay there for every other operation; no operation is excluded.
# Operations no case here can get a 2xx from, and why.
NO_SUCCESS = {
    "POST /api/v1/jobs/{job_id}/resume": "the seeded job succeeded; only a stopped job resumes",
    "POST /api/v1/webhooks": "a webhook needs a public address; tests make no outside calls",
    "DELETE /api/v1/webhooks/{webhook_id}": "so no webhook exists to delete",
}
DESTRUCTIVE = [
    "DELETE /api/v1/schedules/{schedule_id}",
    "DELETE /api/v1/sessions/{session}",
    "DELETE /api/v1/datasets/{name}/data/{document_name}",
    "POST /api/v1/forget",
    "DELETE /api/v1/datasets/{name}",
]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, llm_server: LLMTestServer
) -> Iterator[FuzzWorld]:
    with fuzz_world(tmp_path_factory.mktemp("fuzz-home"), llm_server) as made:
        yield made


def _aimed(case: Any, targets: dict[str, str]) -> Any:
    """The case pointed at real objects: its path parameters, and the datasets a JSON body
    names; parts generated invalid on purpose are left as they are."""
    meta = case.meta
    if case.path_parameters and not (meta and meta.is_negative_at(ParameterLocation.PATH)):
        case.path_parameters = {k: targets.get(k, v) for k, v in case.path_parameters.items()}
    query = case.query
    if query and "entity" in query and not (meta and meta.is_negative_at(ParameterLocation.QUERY)):
        case.query = {**query, "entity": targets["entity"]}
    if isinstance(case.body, dict) and not (meta and meta.is_negative_at(ParameterLocation.BODY)):
        body = dict(case.body)
        if isinstance(body.get("datasets"), list):
            body["datasets"] = [targets["name"]]
        if isinstance(body.get("dataset"), str):
            body["dataset"] = targets["name"]
        case.body = body
    return case


def _drawn(operation: Any, mode: GenerationMode, targets: dict[str, str]) -> Any:
    """The operation's generated cases, about half of them aimed at the seeded objects."""

    @st.composite
    def draw_case(draw: Callable[..., Any]) -> Any:
        case = draw(operation.as_strategy(generation_mode=mode))
        return _aimed(case, targets) if draw(st.booleans()) else case

    return draw_case()


@dataclass
class Tally:
    """Cases run and failures found, per operation and phase."""

    ran: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)

    def record(self, name: str, ran: int, seconds: float, failures: list[str]) -> None:
        self.ran[name], self.seconds[name] = ran, seconds
        if failures:
            self.failures[name] = failures


def _report(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def _covered(
    operation: Any, check: Callable[[Any], None], targets: dict[str, str]
) -> tuple[int, list[str]]:
    """Schemathesis' coverage phase: boundary and invalid values of every parameter and body
    property (deterministic, a few dozen cases per operation); the first failures."""
    schema = operation.schema
    modes = list(GenerationMode)
    config = schema.config.generation_for(operation=operation)
    ran, failures = 0, []
    for case in schema.iter_coverage_cases(
        operation, generation_modes=modes, generation_config=config
    ):
        ran += 1
        try:
            check(_aimed(case, targets))
        except (Exception, FailureGroup) as err:  # noqa: BLE001 - reported below
            failures.append(_report(err))
            if len(failures) >= 3:
                break
    return ran, failures


def _fuzzed(strategy: Any, examples: int, check: Callable[[Any], None]) -> tuple[int, list[str]]:
    """Run `check` on `examples` drawn cases; the number run and the first failure's report."""
    ran = 0

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(case: Any) -> None:
        nonlocal ran
        ran += 1
        check(case)

    try:
        run()
    except Unsatisfiable:  # no invalid value exists (no parameters, or only free strings)
        return ran, []
    # A check's FailureGroup is a BaseExceptionGroup; every failure is collected and reported.
    except (Exception, FailureGroup) as err:  # noqa: BLE001
        return ran, [_report(err)]
    return ran, []


def _negatable(operation: Any) -> bool:
    """Whether invalid requests can be drawn: a body, a query or header parameter, or a path
    parameter with constraints."""
    raw = operation.definition.raw
    return "requestBody" in raw or any(
        param.get("in") != "path" or CONSTRAINTS & set(param.get("schema", {}))
        for param in raw.get("parameters", [])
    )


def _operations(schema: Any) -> list[Any]:
    found = [result.ok() for result in schema.get_all_operations()]
    order = {label: i for i, label in enumerate(DESTRUCTIVE)}
    return sorted(found, key=lambda op: order.get(op.label, -1))


def known_good(world: FuzzWorld) -> dict[str, list[dict[str, Any]]]:
    """Requests that reach the work behind an operation (random data mostly stops at
    validation): per operation, the parts of a case."""
    seeded, job, qa = {"name": SEEDED}, {"job_id": world.job_id}, world.known["qa_id"]
    folder = world.known["sync_source"]
    question = "Who wrote the first algorithm?"
    answer_model = {"type": "object", "properties": {"answer": {"type": "string"}}}
    return {
        "POST /api/v1/datasets/{name}/cognify": [
            {"path_parameters": seeded, "body": {"all": True}},
        ],
        "GET /api/v1/datasets/{name}/graph": [
            {"path_parameters": seeded, "query": {"format": "graphml", "limit": 5}},
        ],
        "GET /api/v1/datasets/{name}/graph/neighbourhood": [
            {"path_parameters": seeded, "query": {"entity": "Ada Lovelace", "limit": 5}},
        ],
        "GET /api/v1/jobs/{job_id}/events": [{"path_parameters": job, "query": {"after": 1}}],
        "POST /api/v1/search": [
            {"body": {"query": question, "datasets": [SEEDED], "search_type": kind}}
            for kind in ("CHUNKS", "CHUNKS_LEXICAL", "GRAPH_PPR", "SUMMARIES", "TEMPORAL")
        ]
        + [
            {
                "body": {
                    "query": question,
                    "datasets": [SEEDED],
                    "search_type": "GRAPH_COMPLETION",
                    "response_model": answer_model,
                }
            },
        ],
        "POST /api/v1/recall": [
            {"body": {"query": question, "session": SESSION, "datasets": [SEEDED]}},
        ],
        "POST /api/v1/remember": [
            {"body": {"text": "Grace Hopper wrote a compiler.", "session": SESSION}},
            {"body": {"text": "Grace Hopper wrote a compiler.", "dataset": SEEDED}},
        ],
        "POST /api/v1/improve": [
            {"body": {"session": SESSION, "qa_id": qa, "feedback": "up"}},
            {"body": {"session": SESSION, "qa_id": qa, "feedback": -0.5, "results": [0]}},
        ],
        "POST /api/v1/forget": [{"body": {"dataset": SPARE, "document": "turing.md"}}],
        "POST /api/v1/datasets/{name}/sync": [
            {"path_parameters": {"name": "fuzzsync"}, "body": {"source": folder}},
        ],
        "POST /api/v1/schedules": [
            {"body": {"dataset": SEEDED, "cognify": True, "all": True, "every": "6h"}},
        ],
    }


def _examples(
    operation: Any, parts: list[dict[str, Any]], check: Callable[[Any], None]
) -> tuple[int, list[str]]:
    """The known-good requests of an operation, each checked; the failures."""
    failures = []
    for given_parts in parts:
        media = {"media_type": "application/json"} if "body" in given_parts else {}
        try:
            check(operation.Case(**given_parts, **media))
        except (Exception, FailureGroup) as err:  # noqa: BLE001 - reported below
            failures.append(_report(err))
    return len(parts), failures


def _fuzz_operation(
    operation: Any,
    targets: dict[str, str],
    examples: list[dict[str, Any]],
    admin: Callable[[Any], None],
    reader: Callable[[Any], None],
    tally: Tally,
) -> None:
    """Known-good requests, coverage cases and drawn valid and invalid cases with the admin
    key, then a few valid ones with the reader key."""
    phases: list[tuple[str, Callable[[], tuple[int, list[str]]]]] = [
        ("examples", partial(_examples, operation, examples, admin)),
        ("coverage", partial(_covered, operation, admin, targets)),
        *[
            (mode.value, partial(_fuzzed, _drawn(operation, mode, targets), EXAMPLES, admin))
            for mode in GenerationMode
            if mode is GenerationMode.POSITIVE or _negatable(operation)
        ],
        (
            "reader",
            partial(
                _fuzzed,
                _drawn(operation, GenerationMode.POSITIVE, targets),
                READER_EXAMPLES,
                reader,
            ),
        ),
    ]
    for phase, run in phases:
        if phase == "examples" and not examples:
            continue
        started = time.monotonic()
        ran, failures = run()
        tally.record(f"{operation.label} [{phase}]", ran, time.monotonic() - started, failures)


def test_fuzz_every_route_no_5xx_and_schema_valid(world: FuzzWorld) -> None:
    config = schemathesis.Config.from_dict(CONFIG)
    schema = schemathesis.openapi.from_url(f"{world.base_url}/openapi.json", config=config)
    session = requests.Session()
    operations = _operations(schema)
    tally = Tally()
    statuses: dict[str, Counter[int]] = {}
    good = known_good(world)
    started, cpu = time.monotonic(), time.process_time()  # the server runs in this process

    def checker(key: str, label: str) -> Callable[[Any], None]:
        checks = CHECKS if label not in STREAMS else CHECKS[:3]

        def check(case: Any) -> None:
            response = case.call(
                base_url=world.base_url, session=session, headers=world.headers(key), timeout=60
            )
            statuses.setdefault(label, Counter())[response.status_code] += 1
            case.validate_response(response, checks=checks, headers=world.headers(key))

        return check

    for operation in operations:
        label = operation.label
        targets = dict(world.known)
        if label in DESTRUCTIVE:
            targets["name"] = SPARE
        examples = good.get(label, [])
        admin, reader = checker(world.admin, label), checker(world.reader, label)
        _fuzz_operation(operation, targets, examples, admin, reader, tally)
    total = sum(tally.ran.values())
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    print(
        f"\nAPI fuzz: {total} cases over {len(operations)} operations, {wall:.0f} s wall, "
        f"{cpu:.0f} s CPU (client and server)"
    )
    for name, ran in tally.ran.items():
        print(f"  {ran:4d}  {tally.seconds[name]:6.1f} s  {name}")
    for label, seen in statuses.items():
        print(f"  {label}: {dict(sorted(seen.items()))}")
    assert len(operations) >= 18, [op.label for op in operations]
    # The run reached the work behind every operation, not only its validation.
    unreached = {label for label, seen in statuses.items() if not any(200 <= s < 300 for s in seen)}
    assert unreached <= set(NO_SUCCESS), unreached - set(NO_SUCCESS)
    assert not tally.failures, "\n\n".join(
        f"== {name}\n" + "\n".join(texts) for name, texts in tally.failures.items()
    )
