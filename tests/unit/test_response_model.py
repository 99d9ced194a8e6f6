"""A JSON Schema response_model from outside is built within bounds or refused clearly.

Every refusal is a ValueError, which the API answers with 422; nothing may escape as another
exception type (a 500) or run unbounded.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.settings import Settings
from retrieval.response_model import InvalidResponseModel, load_schema, structured_model

pytestmark = pytest.mark.unit


def _object(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


def _fan_out(levels: int, refs: int) -> dict[str, Any]:
    """A chain of definitions, each referencing the next `refs` times (refs**levels leaves)."""
    defs: dict[str, Any] = {f"D{levels}": _object({"leaf": {"type": "string"}})}
    for level in range(levels - 1, -1, -1):
        ref = {"$ref": f"#/$defs/D{level + 1}"}
        defs[f"D{level}"] = _object({f"p{i}": dict(ref) for i in range(refs)})
    return _object({"root": {"$ref": "#/$defs/D0"}}, **{"$defs": defs})


def test_each_definition_is_built_once_however_often_it_is_referenced() -> None:
    model = structured_model(_fan_out(3, 5))
    d0 = model.model_fields["root"].annotation.__args__[0]  # Optional[D0]
    d1_types = {d0.model_fields[f"p{i}"].annotation for i in range(5)}
    assert len(d1_types) == 1  # the five references share one built class


def test_the_issues_ref_fan_out_is_accepted_and_validates_replies() -> None:
    schema = _fan_out(6, 5)  # 7 definitions, 5**6 leaves if expanded: was 88 s and 2.3 GB
    assert len(str(schema)) < 3000
    model = structured_model(schema)
    leaf: dict[str, Any] = {"leaf": "x"}
    for _ in range(6):
        leaf = {f"p{i}": leaf for i in range(5)}
    reply = model.model_validate({"root": leaf})
    assert reply.model_dump(mode="json")["root"]["p4"]["p0"]["p2"]["p1"]["p3"]["p0"] == {
        "leaf": "x"
    }


def test_a_recursive_definition_is_refused() -> None:
    kids = {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    schema = _object(
        {"tree": {"$ref": "#/$defs/Node"}}, **{"$defs": {"Node": _object({"kids": kids})}}
    )
    with pytest.raises(ValueError, match="recursive"):
        structured_model(schema)


def test_nodes_properties_depth_and_size_are_capped_by_settings() -> None:
    wide = _object({f"p{i}": {"type": "string"} for i in range(50)})
    settings = Settings(response_model_max_properties=49)
    with pytest.raises(ValueError, match="more than 49 properties"):
        structured_model(wide, settings)
    structured_model(wide, Settings(response_model_max_properties=50))

    many_nodes = _object({"a": {"anyOf": [{"type": "string"}] * 40}})
    with pytest.raises(ValueError, match="more than 30 schema nodes"):
        structured_model(many_nodes, Settings(response_model_max_nodes=30))

    deep: dict[str, Any] = {"type": "string"}
    for _ in range(10):
        deep = _object({"x": deep})
    with pytest.raises(ValueError, match="deeper than 5 levels"):
        structured_model(deep, Settings(response_model_max_depth=5))

    with pytest.raises(ValueError, match="above the 1000 allowed"):
        structured_model(wide, Settings(response_model_max_bytes=1000))


def test_the_default_caps_refuse_a_huge_schema() -> None:
    huge = _object({f"p{i}": {"type": "string"} for i in range(5000)})
    with pytest.raises(ValueError, match="COGMILL_RESPONSE_MODEL_MAX_BYTES"):
        structured_model(huge)


MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "underscore name": (_object({"_x": {"type": "string"}}), "'_x' is not allowed"),
    "model_config name": (_object({"model_config": {"type": "string"}}), "'model_config'"),
    "empty enum": (_object({"a": {"enum": []}}), "'enum' must be a non-empty list"),
    "unhashable enum": (_object({"a": {"enum": [[1], {"b": 2}]}}), "'enum' values must be"),
    "empty anyOf": (_object({"a": {"anyOf": []}}), "'anyOf' must be a non-empty list"),
    "required 5": (_object({"a": {"type": "string"}}, required=5), "'required' must be a list"),
    "$defs list": (_object({"a": {"type": "string"}}, **{"$defs": [1]}), "'\\$defs' must be"),
    "type [{}]": (_object({"a": {"type": [{}]}}), "'type' list must hold type names"),
    "anyOf of numbers": (_object({"a": {"anyOf": [1]}}), "must be a JSON object"),
    "model_dump name": (_object({"model_dump": {"type": "string"}}), "'model_dump'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_schemas_are_refused_with_a_clear_value_error(case: str) -> None:
    schema, reason = MALFORMED[case]
    with pytest.raises(ValueError, match=reason) as caught:
        structured_model(schema)
    # Ours, not a TypeError or a pydantic error (a 500): the API answers it with a 422.
    assert type(caught.value) is InvalidResponseModel


def test_schema_text_nested_past_the_parser_is_refused() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        load_schema("[" * 100_000 + "]" * 100_000)
